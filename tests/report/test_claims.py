"""Claim checks: each type yields holds / does not hold / not enough data."""
import pandas as pd
import pytest

from tcpeval.report import claims as C
from tcpeval.spec import REPO_ROOT as REPO


def _cells():
    rows = []
    for v, m in (("reno", 4.0), ("cubic", 4.2), ("bic", 8.0)):
        rows.append(dict(criterion="responsiveness", variant=v, second="", rtt_ms=0.2, drop=1e-4,
                         mean_gbps=m, mean_frac=m / 10))
    for v, j, s in (("bic", 0.6, 0.8), ("cubic", 0.9, 0.6)):
        rows.append(dict(criterion="compatibility", variant=v, second="reno", rtt_ms=6.2, drop=0.0,
                         jain=j, share_first=s))
    return pd.DataFrame(rows)


def _claim(check):
    return {"id": "x", "section": "V", "paper": "p", "check": check}


@pytest.mark.parametrize("check, verdict", [
    ({"type": "best", "metric": "mean_gbps", "expect": "bic", "where": {"criterion": "responsiveness"}}, C.HOLDS),
    ({"type": "best", "metric": "mean_gbps", "expect": "cubic", "where": {"criterion": "responsiveness"}}, C.FAILS),
    ({"type": "best", "metric": "mean_gbps", "expect": "htcp", "where": {"criterion": "responsiveness"}}, C.NODATA),
    ({"type": "worst", "metric": "mean_gbps", "expect": ["reno", "cubic"], "where": {"criterion": "responsiveness"}}, C.HOLDS),
    ({"type": "at_least", "metric": "mean_frac", "threshold": {"gbps": 3.8, "of_link_gbps": 9.5},
      "where": {"criterion": "responsiveness"}}, C.HOLDS),   # 0.4 >= 0.4
    ({"type": "at_least", "metric": "mean_frac", "threshold": 0.5, "where": {"criterion": "responsiveness"}}, C.FAILS),
    ({"type": "at_least", "metric": "mean_frac", "threshold": 0.5, "where": {"rtt_ms": 24.2}}, C.NODATA),
    ({"type": "above", "metric": "share_first", "threshold": 0.5, "where": {"criterion": "compatibility"}}, C.HOLDS),
    ({"type": "greater", "metric": "jain", "where": {"criterion": "compatibility"},
      "a": {"variant": "cubic"}, "b": {"variant": "bic"}}, C.HOLDS),
    ({"type": "greater", "metric": "jain", "where": {"criterion": "compatibility"},
      "a": {"variant": "bic"}, "b": {"variant": "htcp"}}, C.NODATA),
    ({"type": "close", "metric": "mean_gbps", "tolerance": 0.1, "where": {"criterion": "responsiveness"},
      "a": {"variant": "cubic"}, "b": {"variant": "reno"}}, C.HOLDS),   # 4.2 vs 4.0: 4.8 %
    ({"type": "within", "metric": "mean_gbps", "tolerance": 0.05, "per": ["rtt_ms"],
      "where": {"criterion": "responsiveness"}}, C.FAILS),
])
def test_check_types(check, verdict):
    assert C.evaluate(_claim(check), _cells())[0] == verdict


def test_shipped_claims_load_and_evaluate(smoke_results, design):
    from tcpeval.analysis import tables

    claims = C.load_claims(REPO / "paper" / "claims.yaml")
    assert len(claims) >= 15
    ds = tables.load(smoke_results, design, "smoke", "emulated")
    verdicts = C.check_all(claims, ds)
    kinds = {v.verdict for v in verdicts}
    assert C.NODATA in kinds                    # smoke lacks most RTTs and drops
    assert kinds & {C.HOLDS, C.FAILS}           # but some checks can be decided
    assert "longtable" in C.table(verdicts)


def test_unknown_selection_key_is_an_error():
    with pytest.raises(C.ClaimError):
        C.evaluate(_claim({"type": "best", "metric": "mean_gbps", "expect": "bic", "where": {"colour": 1}}), _cells())


def test_verdicts_by_campaign_have_a_column_per_campaign_with_results(smoke_results, tmp_path):
    from tcpeval.cli import main

    out = tmp_path / "by.tex"
    assert main(["claims", "--results", str(smoke_results), "--claims", "paper/claims.yaml",
                 "--out-tex", str(tmp_path / "c.tex"), "--also", "quick",
                 "--out-campaigns-tex", str(out)]) == 0
    text = out.read_text()
    assert "Finding & \\texttt{smoke} \\\\" in text           # quick has no results here
    assert "Campaigns without results for this backend: \\texttt{quick}." in text
    n_claims = len(C.load_claims("paper/claims.yaml"))
    assert text.count("\\\\\n") - 1 == n_claims               # header + one row per claim
