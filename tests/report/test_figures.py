"""Figures render from synthetic tidy tables, full and partial matrix."""
from pathlib import Path

from tcpeval.analysis import tables
from tcpeval.report import figures


def _load(results, design, **kw):
    return tables.load(results, design, "smoke", "emulated", **kw)


def test_every_figure_renders(smoke_results, design, tmp_path):
    ds = _load(smoke_results, design)
    outs = [figures.draw("responsiveness", ds, tmp_path, rtt_ms=r) for r in (0.2, 6.2)]
    outs += [figures.draw(n, ds, tmp_path) for n in ("utilisation", "convergence", "flows")]
    for out in outs:
        for f in out["files"]:
            assert Path(f).stat().st_size > 1000 or f.suffix == ".tex"
        pdf = next(f for f in out["files"] if f.suffix == ".pdf")
        assert pdf.read_bytes().startswith(b"%PDF")
    tex = (tmp_path / "responsiveness-rtt0.2.tex").read_text()
    # smoke has no 1e-3 at 0.2 ms: the caption must say which drop rate it shows instead
    assert "because the original study's $10^{-3}$ is not in the data" in tex
    assert "\\includegraphics" in tex and "\\label{fig:rtt0.2}" in tex
    assert outs[0]["efficiency_drop"] == 1e-4 and not outs[0]["preferred"]
    # flagged runs are excluded by default and the caption counts them
    n_flagged_resp = ds._flagged("responsiveness")
    assert n_flagged_resp > 0 and f"{n_flagged_resp} run(s) with fidelity verdict" in tex


def test_include_flagged_changes_the_note(smoke_results, design, tmp_path):
    ds = _load(smoke_results, design, include_flagged=True)
    out = figures.draw("responsiveness", ds, tmp_path, rtt_ms=0.2)
    tex = (tmp_path / "responsiveness-rtt0.2.tex").read_text()
    assert "flagged run(s) included" in tex and out["missing_cells"] == 0


def test_partial_matrix_marks_missing(partial_results, design, tmp_path):
    ds = _load(partial_results, design)
    assert len(ds.missing) > 0
    res = [figures.draw("responsiveness", ds, tmp_path, rtt_ms=6.2)]
    res += [figures.draw(n, ds, tmp_path) for n in ("utilisation", "convergence", "flows")]
    assert sum(r["missing_cells"] for r in res) > 0
    tex = (tmp_path / "responsiveness-rtt6.2.tex").read_text()
    assert "missing" in tex and "n/a" in tex
