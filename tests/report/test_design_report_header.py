"""The header of `tcpeval report`: how many runs have verdict ok, and which flagged runs
were left out or included (a flagged run counted as ok would hide the host's trouble)."""
from __future__ import annotations

import pandas as pd

from tcpeval.report import design_report

DESIGN = {"name": "tiny", "campaigns": {"short": {}}, "criteria": {}}
FLAGGED = pd.DataFrame([{"run": "emulated/tiny/short/burst/reno+udp/rtt4/drop0/rep1",
                         "flag_reasons": "cc: the host ran hooks without the port's program"}])


def _content(include_flagged: bool, flagged: pd.DataFrame, n_ok: int) -> dict:
    return {"design": DESIGN, "campaign": "short", "backend": "emulated", "sections": [],
            "n_expected": 2, "n_ok": n_ok, "n_used": n_ok + (len(flagged) if include_flagged else 0),
            "flagged": flagged, "kernel": "6.18", "git_revision": "abc",
            "include_flagged": include_flagged}


def test_flagged_runs_left_out_are_listed_and_not_counted_as_ok():
    html = design_report.render_html(_content(False, FLAGGED, 1))
    assert "Runs with verdict ok: 1 of 2." in html
    assert "Flagged runs (left out)" in html and "reno+udp/rtt4/drop0/rep1</code>: cc: the host" in html


def test_flagged_runs_included_are_said_so_and_still_not_counted_as_ok():
    html = design_report.render_html(_content(True, FLAGGED, 1))
    assert "Runs with verdict ok: 1 of 2 (1 flagged run included)." in html
    assert "Flagged runs (included)" in html


def test_without_flagged_runs_the_header_says_nothing_of_them():
    html = design_report.render_html(_content(True, FLAGGED.iloc[0:0], 2))
    assert "Runs with verdict ok: 2 of 2." in html and "flagged" not in html.lower().replace(".flag", "")


def test_the_pdf_lists_the_flagged_runs_as_the_html_does(tmp_path):
    import subprocess
    path = tmp_path / "r.pdf"
    design_report.render_pdf(_content(False, FLAGGED, 1), path)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "runs with verdict ok: 1 of 2" in text and "Flagged runs (left out):" in text
    assert "reno+udp/rtt4/drop0/rep1: cc: the host ran hooks" in text
    assert design_report._pdf_flagged_lines(_content(False, FLAGGED.iloc[0:0], 2)) == []
