"""The fidelity verdict of a run: did the backend realise the condition?

Tolerances (documented in the trace under fidelity.tolerances):

- drop: the measured rate's Wilson 99.9 % interval must contain the configured p (the
  trace also records the 95 % interval, measured.drop.ci95). Tested only when the
  expected number of drops n*p is at least MIN_EXPECTED_DROPS (10): below that the count
  is too small to tell a faulty dropper from chance (with p = 1e-7 and a million packets
  a single drop already "excludes" p), so such runs are reported as not tested rather
  than flagged. p = 0 requires zero drops. Why 99.9 % and not 95 %: the drop sequence is
  a fixed function of the seed, so a 95 % test would flag about one condition in twenty
  on every rerun, for its seed's luck rather than for the emulator (a seed giving 4 drops
  where 10.8 were expected is such a case); 99.9 % still flags a dropper that misses or
  miscounts packets, and the dropper itself is pinned against the model by
  tests/emulated/test_dropper_bpf.py.
- RTT: the idle RTT measured with the delay in place must lie within
  max(RTT_TOL_ABS_MS, RTT_TOL_REL * setting) of the setting, and the path's base RTT
  must not exceed the setting.
- rate: the configured bottleneck rate must not exceed the host capacity found by
  calibration (an emulated run must not overrun its host); and in a run without drops
  (p = 0, where TCP should fill the link) the host's CPUs must not have been saturated
  (>= CPU_SATURATED busy, host-wide, so other tenants count) while the bottleneck
  carried less than RATE_SHORTFALL of the configured rate: that throughput would be the
  host's limit, not the algorithm's. With p > 0 a shortfall is the algorithm's response,
  so CPU load is recorded (measured.cpu_busy) but not judged.
- delay line: no frame may be lost in its rings, and at most LATE_SHARE_MAX of the frames
  may leave later than LATE_MAX_MS after their due time.
"""
from __future__ import annotations

import math

MIN_EXPECTED_DROPS = 10
Z95 = 1.959963984540054
Z_FLAG = 3.290526731491926  # two-sided 99.9 %
RTT_TOL_ABS_MS = 0.05
RTT_TOL_REL = 0.03
CPU_SATURATED = 0.97
RATE_SHORTFALL = 0.9
LATE_MAX_MS = 0.5
LATE_SHARE_MAX = 0.01


def tolerances() -> dict:
    return {
        "drop": {"interval": "wilson99.9", "recorded_interval": "wilson95",
                 "min_expected_drops": MIN_EXPECTED_DROPS},
        "rtt": {"abs_ms": RTT_TOL_ABS_MS, "rel": RTT_TOL_REL},
        "rate": {"max_fraction_of_host_capacity": 1.0, "cpu_saturated": CPU_SATURATED,
                 "shortfall": RATE_SHORTFALL},
        "delay_line": {"ring_drops": 0, "late_max_ms": LATE_MAX_MS, "late_share_max": LATE_SHARE_MAX},
    }


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n <= 0:
        return (0.0, 1.0)
    phat = k / n
    denom = 1 + z * z / n
    centre = (phat + z * z / (2 * n)) / denom
    half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); say so rather than leave rounding residue.
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


def drop_check(p: float, seen: int, dropped: int) -> tuple[str | None, str]:
    """(reason or None, status) for the drop stage."""
    if p == 0:
        return (None, "ok") if dropped == 0 else (f"drop: {dropped} packets dropped with p = 0", "failed")
    if seen * p < MIN_EXPECTED_DROPS:
        return None, f"not tested: expected drops {seen * p:.2g} < {MIN_EXPECTED_DROPS}"
    lo, hi = wilson(dropped, seen, Z_FLAG)
    if not lo <= p <= hi:
        return (f"drop: measured rate {dropped}/{seen} = {dropped / seen:.3g}, 99.9% CI "
                f"[{lo:.3g}, {hi:.3g}] excludes the configured p = {p:g}"), "failed"
    return None, "ok"


def rtt_tolerance_ms(setting_ms: float) -> float:
    return max(RTT_TOL_ABS_MS, RTT_TOL_REL * setting_ms)


def verdict(*, p: float, seen: int, dropped: int, rtt_setting_ms: float, base_rtt_ms: float | None,
            rtt_ms: float | None, rate_bps: float, host_capacity_bps: float | None,
            achieved_bps: float | None, cpu_busy: float | None, delay_stats: dict | None,
            extra_reasons: list[str] = ()) -> dict:
    reasons = list(extra_reasons)
    checks = {}
    reason, checks["drop"] = drop_check(p, seen, dropped)
    if reason:
        reasons.append(reason)
    tol = rtt_tolerance_ms(rtt_setting_ms)
    if base_rtt_ms is not None and base_rtt_ms > rtt_setting_ms + tol:
        reasons.append(f"rtt: the path's base RTT {base_rtt_ms:.3f} ms exceeds the setting "
                       f"{rtt_setting_ms} ms")
    if rtt_ms is None:
        reasons.append("rtt: not measured")
    elif abs(rtt_ms - rtt_setting_ms) > tol:
        reasons.append(f"rtt: measured {rtt_ms:.3f} ms, setting {rtt_setting_ms} ms, "
                       f"tolerance +-{tol:.3f} ms")
    if host_capacity_bps is None:
        reasons.append("rate: host capacity unknown (run `tcpeval calibrate`)")
    elif rate_bps > host_capacity_bps:
        reasons.append(f"rate: configured {rate_bps / 1e9:.3g} Gbps exceeds what this host "
                       f"carries ({host_capacity_bps / 1e9:.3g} Gbps, calibration)")
    if (p == 0 and cpu_busy is not None and achieved_bps is not None and cpu_busy >= CPU_SATURATED
            and achieved_bps < RATE_SHORTFALL * rate_bps):
        reasons.append(f"rate: host CPUs {cpu_busy:.0%} busy while the bottleneck carried "
                       f"{achieved_bps / 1e9:.3g} of {rate_bps / 1e9:.3g} Gbps: host-limited")
    if delay_stats:
        if delay_stats.get("ring_drops", 0) > 0:
            reasons.append(f"delay line: {delay_stats['ring_drops']} frames lost in its rings")
        total = delay_stats.get("forwarded", 0)
        late = late_frames(delay_stats)
        if total and late / total > LATE_SHARE_MAX:
            reasons.append(f"delay line: {late}/{total} frames left more than "
                           f"{LATE_MAX_MS} ms late")
    return {"verdict": "flagged" if reasons else "ok", "reasons": reasons,
            "tolerances": tolerances(), "checks": checks}


def late_frames(stats: dict) -> int:
    """Frames released later than LATE_MAX_MS (from the quantum-relative histogram)."""
    q_ms = stats.get("quantum_ns", 0) / 1e6
    hist = stats.get("error_histogram", {})
    bounds = [("lt_q", 1), ("lt_2q", 2), ("lt_5q", 5), ("lt_10q", 10), ("lt_100q", 100), ("ge_100q", math.inf)]
    late = 0
    lower = 0.5
    for name, upper in bounds:
        # count a bucket when its lower edge is already beyond the limit
        if lower * q_ms >= LATE_MAX_MS:
            late += hist.get(name, 0)
        lower = upper
    return late
