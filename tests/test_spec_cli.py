"""`tcpeval design ...` as a user types it."""
import json

from tcpeval import paths, spec
from tcpeval.cli import main
from test_trace import make_record


def test_runs_count_prints_table_ii(capsys):
    assert main(["design", "runs", "--campaign", "paper", "--count"]) == 0
    out = capsys.readouterr().out
    assert "responsiveness\t840" in out and "compatibility\t100" in out and "total\t1280" in out


def test_resolve_prints_the_condition(capsys):
    assert main(["design", "resolve", "data/raw/emulated/smoke/convergence/bic+reno/rtt6.2/drop0/rep1"]) == 0
    cond = json.loads(capsys.readouterr().out)
    assert [f["variant"] for f in cond["flows"]] == ["bic", "reno"] and cond["flows"][1]["start_s"] == 4.0


def test_bad_path_is_a_user_error_with_exit_code_2(capsys):
    assert main(["design", "resolve", "data/raw/emulated/smoke/fairness/bic+bic/rtt6.2/drop0/rep9"]) == 2
    assert "nearest valid path" in capsys.readouterr().err


def test_status_counts_done_and_flagged_runs_and_estimates_time(tmp_path, capsys, design):
    runs = spec.expand(design, "smoke")
    for cond, verdict in ((runs[0], "ok"), (runs[1], "flagged")):
        record = make_record()
        record["fidelity"] = {"verdict": verdict, "reasons": ["x"] if verdict == "flagged" else []}
        target = tmp_path / paths.trace_path(cond, "raw")
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(record))
    assert main(["design", "status", "--campaign", "smoke", "--raw-dir", str(tmp_path / "raw")]) == 0
    out = capsys.readouterr().out
    assert "responsiveness       2 /    24 done   1 flagged" in out
    assert f"2 /    {len(runs)} done" in out and "ETA:" in out
