"""The package's user-facing errors, in a module that imports nothing of the package, so
every layer (spec, paths, backends, analysis, CLI) can raise them without import cycles."""
from __future__ import annotations


class UserError(Exception):
    """An error caused by the user's input: printed without a traceback, exit code 2."""


class SpecError(ValueError):
    """The design, a campaign or a requested run is invalid; the message names the field."""
