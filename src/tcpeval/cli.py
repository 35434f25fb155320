"""The `tcpeval` command. Each area contributes its subcommands through `add_parsers`."""
from __future__ import annotations

import argparse
import importlib
import sys

from tcpeval.errors import UserError

# Modules that define `add_parsers(subparsers)`; each sets `func` on its parsers.
COMMAND_MODULES = [
    "tcpeval.spec_cli",
    "tcpeval.trace_cli",
    "tcpeval.datastore",
    "tcpeval.analysis.cli",
    "tcpeval.report.cli",
    "tcpeval.cc.cli",
    "tcpeval.backends.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tcpeval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"tcpeval: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `tcpeval design runs | head`: the reader left; not an error of ours.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("tcpeval: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
