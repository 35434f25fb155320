"""The per-run metrics beyond the paper's (extract._other_studies), on hand-made flows."""
import math

import numpy as np

from tcpeval.analysis import extract


def _flow(start, rates_mbps, protocol="tcp", stop=None, dt=1.0):
    t = np.arange(1, len(rates_mbps) + 1) * dt
    b = np.array(rates_mbps, dtype=float) * 1e6 / 8 * dt
    return {"flow": {"protocol": protocol, "stop_s": stop}, "t": t, "b": b, "n": len(t),
            "start": float(start), "end": float(start + t[-1])}


def test_the_disturbance_is_the_udp_flows_lifetime():
    tcp = _flow(0, [100] * 10)
    udp = _flow(3, [50] * 3, protocol="udp", stop=6.0)
    assert extract.disturbance_window([tcp, udp], 10.0) == (3.0, 6.0)


def test_without_udp_the_disturbance_is_a_flow_that_comes_and_goes():
    assert extract.disturbance_window([_flow(0, [1] * 10), _flow(2, [1] * 4, stop=6.0)], 10.0) == (2.0, 6.0)
    assert extract.disturbance_window([_flow(0, [1] * 10), _flow(0, [1] * 10)], 10.0) is None


def test_recovery_and_jain_over_the_overlap_by_hand():
    # flow 0: 100 Mbit/s for 3 s, 40 during the burst [3, 6), then 60, 95, 100, 100
    tcp = _flow(0, [100, 100, 100, 40, 40, 40, 60, 95, 100, 100])
    udp = _flow(3, [60, 60, 60], protocol="udp", stop=6.0)
    out = extract._other_studies([tcp, udp], 10.0, 1.0)
    assert out["n_tcp"] == 1 and math.isnan(out["jain_overlap"])
    assert out["tcp_total_bps"] == 775e6 / 10          # (300 + 120 + 355) Mbit over 10 s
    assert out["pre_bps"] == 100e6 and out["during_bps"] == 40e6
    assert out["post_bps"] == 355e6 / 4 and out["recovery_ratio"] == 0.8875
    # 90 % of 100: first reached by the interval (7, 8] -> 1 s after the burst ends at 6
    assert out["recovered"] and out["recovery_time_s"] == 1.0


def test_jain_counts_only_the_seconds_two_tcp_flows_share():
    a = _flow(0, [100, 100, 75, 75, 100])
    b = _flow(2, [25, 25])              # active in (2, 4] only
    out = extract._other_studies([a, b], 5.0, 1.0)
    # two cells, each Jain(75, 25) = 100^2 / (2 * (75^2 + 25^2)) = 0.8
    assert math.isclose(out["jain_overlap"], 0.8) and out["overlap_s"] == 2.0
