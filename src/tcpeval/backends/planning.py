"""What a campaign will cost on this host: each run's time-dilation factor, its traffic
time and wall time (`tcpeval plan`, and the ETA of `tcpeval design status`)."""
from __future__ import annotations

from dataclasses import dataclass

from tcpeval import dilation

# Wall time of a run beyond its traffic: namespaces, qdiscs, BPF, RTT set-up, teardown,
# trace writing (`make bench` measures it; ~10 s here, more with the delay line's RTT
# correction at long RTTs).
RUN_OVERHEAD_S = 15.0


@dataclass(frozen=True)
class Ceiling:
    """The highest rate the backend carries faithfully, and where the figure comes from."""
    rate_bps: float | None
    default_rate_bps: float | None
    source: str


def ceiling(backend: str) -> Ceiling:
    """Emulated: the cached calibration of this host and build (none yet: unknown);
    testbed: real links, no ceiling and no dilation."""
    if backend != "emulated":
        return Ceiling(None, None, f"{backend}: real links run in real time (no dilation)")
    from tcpeval.backends.emulated import build, calibrate
    try:
        cal = calibrate.load(build.ensure_built().hashes)
    except Exception as err:  # a host that cannot build the emulator can still plan
        return Ceiling(None, None, f"no calibration ({type(err).__name__}: {err})")
    if cal is None:
        return Ceiling(None, None, "no calibration of this host and build yet "
                                   "(`tcpeval calibrate`); factors assume 1")
    rate = cal.get("faithful_rate_bps") or cal["host_capacity_bps"]
    return Ceiling(rate, cal.get("default_rate_bps"),
                   f"calibration of {cal.get('measured_at', '?')}: faithful up to "
                   f"{rate / 1e9:.3g} Gbps")


@dataclass(frozen=True)
class RunPlan:
    factor: int | None       # None: the run would be refused
    traffic_s: float         # virtual (the condition's duration)
    wall_s: float            # physical traffic x factor + overhead
    refused: str | None = None


def plan_run(cond, ceil: Ceiling) -> RunPlan:
    """The factor a run gets (as the emulated backend chooses it) and what it costs."""
    rate = cond.rate_bps if cond.rate_bps is not None else ceil.default_rate_bps
    try:
        k = dilation.factor_for(cond, rate, ceil.rate_bps) if ceil.rate_bps else 1
    except dilation.DilationError as err:  # as the emulated backend would refuse it
        return RunPlan(None, cond.duration_s, 0.0, str(err))
    return RunPlan(k, cond.duration_s, cond.duration_s * k + RUN_OVERHEAD_S)
