"""The leftover check of the emulated tests judges a real run or fails: without a run id
it would look for nothing and pass (no root needed)."""
import pytest
from emulated_helpers import nothing_left, run_id_of


def test_leftover_check_refuses_a_missing_run_id():
    with pytest.raises(AssertionError, match="not a run id: None"):
        nothing_left(None)


def test_run_id_is_read_from_the_run_log_or_the_test_fails(tmp_path):
    with pytest.raises(AssertionError, match="no run id: cannot read .*run.log"):
        run_id_of(tmp_path)
    (tmp_path / "run.log").write_text("[   0.00s] building datapath.bpf.o\n")
    with pytest.raises(AssertionError, match="no run id in .*run.log"):
        run_id_of(tmp_path)
    (tmp_path / "run.log").write_text("[   0.00s] building\n[   0.31s] run 1a2b3c: cubic rtt 2.0 ms\n")
    assert run_id_of(tmp_path) == "1a2b3c"
