"""What the method checks of the manuscript (tcpeval.report.dilation_check,
tcpeval.report.stopping_check) share: writing their paragraph and comparisons, and the
verdict column of their plain-text tables."""
from __future__ import annotations

import json
from pathlib import Path


def write_outputs(lines: list[str], out_tex: Path, out_json: Path | None, payload: dict) -> None:
    """The paragraph (lines) to out_tex, the payload (campaign, summary, comparisons) to
    out_json, creating their directories."""
    out_tex = Path(out_tex)
    out_tex.parent.mkdir(parents=True, exist_ok=True)
    out_tex.write_text("\n".join(lines) + "\n")
    if out_json:
        Path(out_json).parent.mkdir(parents=True, exist_ok=True)
        Path(out_json).write_text(json.dumps(payload, indent=1, default=str))


def verdict_cell(result: dict) -> str:
    """'yes', or 'NO: ' and the checks that failed."""
    if result["agree"]:
        return "yes"
    return "NO: " + ", ".join(c for c, ok in result["checks"].items() if not ok)
