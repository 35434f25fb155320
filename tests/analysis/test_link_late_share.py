"""The runs table's link_late_share: the share of the link engine's departures later than
the path's RTT tolerance, read from the engine's physical per-microsecond histogram."""
import math

import pytest

from tcpeval.analysis import extract, synthetic
from tcpeval.condition import Condition, Flow


def _record(hist: dict | None, rtt_ms: float = 0.2, k: int = 1) -> dict:
    cond = Condition(backend="emulated", campaign="t", criterion="responsiveness", flows=(Flow(variant="reno"),),
                     rtt_ms=rtt_ms, drop=1e-5, rep=1, duration_s=4.0, interval_s=0.1)
    record = synthetic.make_record(cond)
    record["fidelity"]["tolerances"] = {"rtt": {"abs_ms": 0.05, "rel": 0.03}}
    record["measured"]["delay_line"] = {"link": {"late_us_histogram": hist}} if hist is not None else {}
    return record


def test_the_share_counts_the_frames_later_than_the_rtt_tolerance():
    # 0.2 ms: the tolerance is 0.05 ms (3 % of 0.2 ms is less): bins 50 us and beyond, 30 of 1000
    hist = {"0": 900, "49": 70, "50": 20, "300": 9, "2000": 1}
    assert extract.link_late_share(_record(hist), 1) == pytest.approx(30 / 1000)
    # at 24.2 ms the tolerance is 3 % of the RTT, 726 us: only the bin of 2 ms and more
    assert extract.link_late_share(_record(hist, rtt_ms=24.2), 1) == pytest.approx(1 / 1000)


def test_a_dilated_runs_histogram_is_physical_so_its_limit_is_k_times_the_virtual_one():
    # x3: 150 us physical; the 50-us bin is within it now
    hist = {"0": 900, "49": 70, "50": 20, "149": 5, "150": 4, "2000": 1}
    assert extract.link_late_share(_record(hist), 3) == pytest.approx(5 / 1000)


def test_a_run_without_a_link_engine_has_none():
    assert math.isnan(extract.link_late_share(_record(None), 1))
    assert math.isnan(extract.link_late_share(_record({}), 1))


def test_the_runs_table_carries_it():
    row, _, _ = extract.summarise(_record({"0": 98, "60": 2}))
    assert row["link_late_share"] == pytest.approx(0.02)
