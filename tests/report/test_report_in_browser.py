"""The design report as a reader meets it: opened in headless Chromium (Debian's), every
criterion of the paper's design has its section, every figure decodes and fits the window,
nothing makes the page scroll sideways and no script fails. The screenshot stays with the
test's files (and in $TCPEVAL_TEST_ARTIFACTS when set)."""
from __future__ import annotations

from browser_check import MAX_HEIGHT, WIDTH, open_page, problems
from tcpeval import spec
from tcpeval.cli import main


def png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_the_design_report_opens_in_a_browser_with_every_figure_and_nothing_overflowing(
        smoke_results, design, tmp_path):
    out = tmp_path / "report"
    assert main(["report", "--design", str(spec.DEFAULT_DESIGN), "--campaign", "smoke",
                 "--results", str(smoke_results), "--out-dir", str(out)]) == 0
    shot = tmp_path / "design-report.png"
    seen = open_page(out / "report.html", shot)
    assert not problems(seen), problems(seen)
    # a section per criterion of the campaign, each with its figures
    for name in spec.criteria_of(design, "smoke"):
        assert name in seen["text"], name
    html = (out / "report.html").read_text()
    assert len(seen["images"]) == html.count("<img") >= 2 * len(spec.criteria_of(design, "smoke"))
    assert all(0 < i["shown_width"] <= seen["window_width"] for i in seen["images"]), seen["images"]
    width, height = png_size(shot)
    assert width == WIDTH and height >= min(seen["height"], MAX_HEIGHT) > 900
