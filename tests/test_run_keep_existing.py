"""`tcpeval run --keep-existing` (how the workflow's rule runs a run): an existing trace is
kept and the command succeeds without touching the host; a trace that does not read back,
one recorded under another condition than the design's now, or asking to keep and to
replace at once, is the user's to settle."""
import json
from pathlib import Path

from tcpeval.backends.cli import condition_differences
from tcpeval.cli import main

REPO = Path(__file__).resolve().parents[1]
DESIGN = str(REPO / "config" / "design.yaml")


def _one_trace(root: Path) -> Path:
    assert main(["synthetic", str(root / "data" / "raw"), "--design", DESIGN,
                 "--fraction", "0.05"]) == 0
    return sorted((root / "data" / "raw").rglob("trace.json"))[0]


def test_an_existing_trace_is_kept_and_the_run_succeeds(tmp_path, capsys):
    trace = _one_trace(tmp_path)
    before = trace.read_bytes()
    assert main(["run", str(trace), "--keep-existing", "--design", DESIGN,
                 "--raw-dir", str(tmp_path / "data" / "raw")]) == 0
    out = capsys.readouterr().out
    assert f"{trace}: kept: it exists" in out and f"tcpeval run --force {trace}" in out
    assert trace.read_bytes() == before and sorted(p.name for p in trace.parent.iterdir()) == ["trace.json"]


def test_a_trace_that_does_not_read_back_is_named_and_left_as_it_is(tmp_path, capsys):
    trace = _one_trace(tmp_path)
    trace.write_text('{"schema_version": 4, "run_id": ')  # cut short by hand
    assert main(["run", str(trace), "--keep-existing", "--design", DESIGN,
                 "--raw-dir", str(tmp_path / "data" / "raw")]) == 2
    err = capsys.readouterr().err
    assert f"{trace}: unreadable trace" in err and "move it away to run the condition again" in err
    assert trace.read_text() == '{"schema_version": 4, "run_id": '


def test_keeping_and_replacing_at_once_is_refused(tmp_path, capsys):
    trace = _one_trace(tmp_path)
    before = trace.read_bytes()
    assert main(["run", str(trace), "--keep-existing", "--force", "--design", DESIGN,
                 "--raw-dir", str(tmp_path / "data" / "raw")]) == 2
    assert "--keep-existing and --force contradict each other" in capsys.readouterr().err
    assert trace.read_bytes() == before


def test_a_trace_recorded_under_another_condition_is_named_with_its_fields_and_left_as_it_is(tmp_path, capsys):
    trace = _one_trace(tmp_path)
    record = json.loads(trace.read_text())
    asked = record["condition"]["seed"]
    record["condition"]["seed"] = asked + 1           # as if the design had changed it since
    trace.write_text(json.dumps(record))
    before = trace.read_bytes()
    assert main(["run", str(trace), "--keep-existing", "--design", DESIGN,
                 "--raw-dir", str(tmp_path / "data" / "raw")]) == 2
    err = capsys.readouterr().err
    assert f"{trace}: recorded under another condition than the design's now (seed: {asked + 1} -> {asked})" in err
    assert "move it away to run the condition again" in err
    assert trace.read_bytes() == before


def test_a_stopping_rule_that_differs_is_named_by_its_settings():
    recorded = {"seed": 1, "stop": {"half_width": 0.05, "max_s": 30.0}}
    wanted = {"seed": 1, "stop": {"half_width": 0.0125, "max_s": 30.0}}
    assert condition_differences(recorded, wanted) == ["stop.half_width: 0.05 -> 0.0125"]
    assert condition_differences({"seed": 1}, {"seed": 1, "stop": None}) == []
    assert condition_differences(wanted, wanted) == []
