"""A data-centre path of 20 us RTT: shorter than this host's own latency, it runs
time-dilated until its physical RTT reaches the shortest path the calibration measured,
and the verdict (RTT, loaded RTT) judges it there."""
from __future__ import annotations

import math

import pytest
from emulated_helpers import (
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    run_id_of,
)

from tcpeval import trace
from tcpeval.backends.emulated import calibrate
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root


def test_a_20_us_path_is_stretched_into_the_calibrated_grid_and_judged_there(backend, tmp_path):
    cal = backend.calibrate(force=False)
    floor = calibrate.shortest_rtt_ms(cal)
    rtt_ms = 0.02
    # 0.4 virtual s (20,000 round trips) sampled every 20 ms: the host's stalls dilate this
    # path about 10 times as far as the 0.2-ms one (x140 where that takes x14), so each
    # virtual second costs over two minutes
    cond = adhoc_condition(["reno"], rtt_ms, 0.0, 0.4, interval_s=0.02, rate_bps=1e9, seed=9)
    record = backend.run(cond, tmp_path)
    on_disk = trace.read_trace(tmp_path)
    dil = on_disk["mechanisms"]["dilation"]
    assert dil["factor"] >= math.ceil(floor / rtt_ms - 1e-9)
    assert dil["scaled"]["physical_rtt_ms"] >= floor * (1 - 1e-9)
    # judged in the virtual path's units: the RTT the senders saw under load against 20 us
    # plus the queue the buffer allows, like any other run
    assert on_disk["measured"]["loaded_rtt"]["bound_ms"] is not None
    assert_ok_unless_the_host_fell_behind(record)
    assert nothing_left(run_id_of(tmp_path))
