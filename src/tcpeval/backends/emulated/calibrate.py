"""What this host carries on the emulated path, faithfully: an envelope per link
mechanism, flow count and physical RTT, cached per host, kernel and build.

`tcpeval calibrate` (or the first run that needs it) measures a grid of points (GRID:
one and two flows at physical RTTs from the design's shortest to PHYSICAL_RTT_REACH
times its longest, where time-dilated runs of the design land). At each point it first
pushes unshaped native-CUBIC flows through the complete per-packet path -- the run's own
topology, CPU placement, offloads, the BPF dropper enabled at p = 0, the delay line --
for the host's raw capacity there (the steady state: the run's second half). Then, for
each link mechanism (bottleneck.LINKS), it searches that point on its own, from the top
(90 % of the raw capacity there, or at a shorter RTT with as many flows where that was
more: a long path's unshaped run ends in slow start) down by bisection on a 0.1 Gbps grid, for the highest
bottleneck rate at which a run comes out with fidelity verdict ok -- delay line and link
on time, senders' loaded RTT within the path's, receivers ACKing every second segment
(tcpeval.backends.fidelity) -- and the link, not the CPUs, limits the flow: it delivers
at least 98 % of the payload the link can carry. A run spoiled only by transient host
trouble (a stalled vCPU) is tried again, up to FAITHFUL_TRIES times; one late only in the
host stalls the link engine saw (findings marked host_stall: the hypervisor held its vCPU,
and a lower rate would meet the same stalls) counts as faithful. A virtual machine's
stalls come in spells (one spell: ~5 ms every second on one vCPU, for minutes; flagging
every rate down to 0.2 Gbps at the point it hit): a point whose result on a link is below
RESEARCH_SHARE of the median of that link's other points, and which was refused for
transient trouble alone, is searched once more after the rest of the grid, and keeps the
higher of its two results.

Every run of the calibration also lists the host stalls its link engine saw (their
lengths, over the time it watched: `host_stalls`). A stall as long as several of the
physical path's round trips disturbs a run however low its rate (fidelity.stall_check),
so the shortest factor an `auto` run may take at an RTT is the one whose physical round
trip makes the host's stalls rare enough (`stall_floor`).

The 3.16 ports then get their own ceiling at each point and mechanism: the host may run
a port's congestion-control hooks without its BPF program (cc/include/cc316.h, "host-fault
guard"; one reno316 flow filling the link at 0.2 ms skipped them for 0.2-0.6 % of its data
at x7 and x10, and for 8-15 % of its reductions, from run to run). From the faithful
rate down in steps of PORTS_STEP, PORTS_VARIANT ports (as many flows as the point has)
fill the link at p = 0 until the guard's check passes (fidelity.guard_check: its
reductions) and the share of their acknowledged data whose hooks did not run stays within
PORTS_SKIP_SHARE (half the verdict's limit: headroom for the runs). Only the guard counts
there; the native search judged the rest of the path. Where no rate gets there but every
rate stays within the verdict's limit and the floor skips about as much as the top, the
rate is not the cause and the ceiling is the link's (not_rate_bound).

A run then takes, among the mechanisms, the smallest time-dilation factor k whose rate/k
lies inside that mechanism's envelope at the physical RTT k x RTT (log-linear between
grid points; the end points beyond the grid), and the mechanism that gives it
(`choose`); a run with a 3.16 port uses the lower of the two ceilings. Runs without a
configured rate use the default rate: DEFAULT_SHARE of the lowest faithful rate of the best
mechanism over the design's own RTTs, rounded down to 0.1 Gbps. Calibration runs under the host lock (no experiment of ours disturbs it); the host's load average
before and after is recorded, since other tenants' load lowers the figures. The result is
cached in /var/cache/tcpeval (root) or ~/.cache/tcpeval, keyed by hostname, kernel, CPU
count and the content hash of the backend (its C/BPF sources and Python modules, and the verdict), so a
new kernel or a changed backend is calibrated anew; it is recorded in each trace.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import socket
import statistics
import tempfile
import time
from pathlib import Path

from tcpeval import dilation, provenance
from tcpeval.backends import common, fidelity
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated.bottleneck import LINKS, forced_link
from tcpeval.condition import PAYLOAD_SHARE
from tcpeval.spec import load_design

DEFAULT_FRACTION = 0.9
FAITHFUL_FLOOR_BPS = 0.2e9
FAITHFUL_TRIES = 3
GRID_BPS = 1e8
# The share of the payload ceiling (condition.PAYLOAD_SHARE of the link: the paper's MSS
# in a full-sized frame) a faithful link at p = 0 must deliver: what the verdict asks of
# every lossless run's link (fidelity.link_busy_check), so that a rate called faithful here
# is one a run there may keep busy.
DELIVERY = fidelity.LINK_BUSY_MIN
# The grid's physical RTTs reach this many times the design's longest: where its
# dilated runs land (the paper's 24.2 ms at k = 8 is 194 ms).
PHYSICAL_RTT_REACH = 8
GRID_FLOWS = (1, 2)
MIN_RTTS_PER_RUN = 40   # a calibration run lasts at least this many RTTs
VERSION = 7  # 6: the ports' ceiling per point and mechanism (ports_rate_bps); 7: host stalls
# The ports' ceiling: the variant that fills the link (the native search's algorithm, as
# its 3.16 port), the step down, and the share of skipped hooks a rate may show
PORTS_VARIANT = "cubic"
PORTS_STEP = 0.8
PORTS_SKIP_SHARE = fidelity.GUARD_SHARE_MAX / 2
NOT_RATE_BOUND = 0.8  # the lower rates' share over the upper ones' where the rate is not the cause
HERE = Path(__file__).resolve().parent


def grid(design: dict | None = None) -> tuple:
    """((flows, physical RTT ms), ...) of the envelope, for each of GRID_FLOWS: the design's
    shortest and longest responsiveness RTT (its runs without dilation), their geometric
    mean, and PHYSICAL_RTT_REACH x the longest (its dilated runs)."""
    lo, hi = design_rtt_range(design)
    rtts = sorted({lo, round(math.sqrt(lo * hi), 1), hi, round(PHYSICAL_RTT_REACH * hi, 1)})
    return tuple((f, r) for f in GRID_FLOWS for r in rtts)


def judged_at(rtt_ms: float, design: dict | None = None) -> int:
    """The dilation whose tolerances judge the grid point at physical RTT ``rtt_ms``: the
    least factor any of the design's runs that land there can have (a run at physical
    RTT R of a virtual path no longer than the design's longest, hi, is dilated at least
    R / hi-fold). The verdict scales its time tolerances with the factor (a frame 2 ms late
    on a path slowed 8-fold is 0.25 ms late on the path it stands for), so judging the
    point at k = 1 would hold it to a standard no run that uses it is held to. Points
    within the design's own RTTs are judged undilated."""
    _, hi = design_rtt_range(design)
    return max(1, math.floor(rtt_ms / hi + 1e-9))


def design_rtt_range(design: dict | None = None) -> tuple[float, float]:
    if design is None:
        design = load_design()
    rtts = design["criteria"]["responsiveness"]["grid"]["rtt_ms"]
    return min(rtts), max(rtts)


# Taken when the process loads the backend: a process still running older code (a
# campaign while its author edits the backend) must not file its calibration under the
# key of the sources now on disk. The verdict (backends/fidelity.py) is in it too: it
# decides which calibration runs count as faithful.
_BACKEND_HASH = hashlib.sha256("".join((provenance.sources_hash(HERE, ("*.py",)),
                                         provenance.sources_hash(HERE.parent, ("fidelity.py",)))).encode()).hexdigest()


def backend_hash() -> str:
    """Content hash of the backend's Python modules (placement, topology, offloads...) and
    of the verdict, as this process loaded them: they shape the per-packet path as much as
    the C sources do, and the verdict decides what of it counts."""
    return _BACKEND_HASH


def cache_dir() -> Path:
    if os.environ.get("TCPEVAL_CACHE"):
        return Path(os.environ["TCPEVAL_CACHE"])
    return Path("/var/cache/tcpeval") if os.geteuid() == 0 else Path.home() / ".cache" / "tcpeval"


def input_backlog() -> int | None:
    """net.core.netdev_max_backlog: how many frames a CPU's input queue holds before the
    kernel drops them (the senders' frames into the switch in a slow start's overshoot,
    docs/fidelity.md); a host that changed it carries other rates faithfully."""
    try:
        return int(Path("/proc/sys/net/core/netdev_max_backlog").read_text())
    except (OSError, ValueError):
        return None


def host_key(build_hashes: dict) -> dict:
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "kernel_version": platform.version(), "cpus": os.cpu_count(),
            "netdev_max_backlog": input_backlog(),
            "build": {k: v[:16] for k, v in sorted(build_hashes.items())},
            "backend_py": backend_hash()[:16], "version": VERSION,
            # ports as modules have no ceiling of their own: a calibration of its own
            **({"port_as": "kmod"} if common.port_as() == "kmod" else {})}


def cache_path(key: dict) -> Path:
    return cache_dir() / f"emulated-capacity-{key['hostname']}-{key['kernel']}.json"


def load(build_hashes: dict, links: tuple = ()) -> dict | None:
    """The cached calibration of this host, kernel and build, or None; None too where it
    lacks one of ``links``: one made under $TCPEVAL_LINK measured that mechanism alone, and
    a run on another would find it carrying nothing."""
    key = host_key(build_hashes)
    try:
        data = json.loads(cache_path(key).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if data.get("key") != key or not set(links) <= set(data.get("links") or LINKS):
        return None
    return data


def search_grid(top_bps: float) -> tuple[float, float]:
    """(step, floor) of a search from ``top_bps``: GRID_BPS and FAITHFUL_FLOOR_BPS, or
    below that floor (a search that found nothing down to it continues there: Debian's
    kernel under QEMU without KVM carried 0.1-0.2 Gbit/s) a power of ten giving at least
    20 steps."""
    if top_bps >= FAITHFUL_FLOOR_BPS:
        return GRID_BPS, FAITHFUL_FLOOR_BPS
    step = 10.0 ** math.floor(math.log10(max(top_bps, 2e4) / 20))
    return step, 2 * step


def on_grid(rate_bps: float, step: float) -> float:
    return math.floor(rate_bps / step + 1e-9) * step


def default_rate(capacity_bps: float) -> float:
    top = capacity_bps * DEFAULT_FRACTION
    return on_grid(top, search_grid(top)[0])


# A run that fell short of its payload by less than this share is tried again, like one
# the host stalled: at 193.6 ms one 23-ms stall of the vCPU left 1.2 Gbps delivering 95.6 %,
# and at 2.2 ms 1.0 Gbps delivered 97.6 % with nothing else amiss (both points then read
# 0.9-1.1 Gbps in a calibration whose neighbours had 1.5-1.8, and 2.7 at 2.2 ms the hour
# before). A host that cannot carry the rate falls short on every try, most by far (at
# 7.9 Gbps: 33 %, refused at once).
TRANSIENT_SHORTFALL = 0.9


def delivered_shortfall(record: dict, rate_bps: float) -> list[fidelity.Finding]:
    """At p = 0 native CUBIC (buffer = BDP) keeps the link busy, so it delivers the rate's
    payload share (PAYLOAD_SHARE: the paper's segments in wire frames). A steady state
    below DELIVERY of that means the host, not the link, limited the flow -- on a 2-CPU
    host one saturated CPU leaves the host-wide figure the verdict watches far below
    saturation, so the verdict alone would call such a rate faithful. 90 % of the wire
    rate was too lenient: time-dilated runs at the rate it let through fell short of
    their payload (docs/fidelity.md). A small shortfall (TRANSIENT_SHORTFALL) is transient:
    a stall of the host, not the rate, may have caused it, so the run is tried again."""
    m = record["measured"]
    link = m.get("link_steady")
    if link:  # exact: the link's own wire bytes over the second half, as payload
        steady, how = PAYLOAD_SHARE * link["bps"], f"the link's {link['source']} counters"
    else:     # the receivers' samples (a hole filled late counts when it is filled)
        steady, how = m["steady_throughput_bps"] or 0.0, "the receivers' samples"
    payload = PAYLOAD_SHARE * rate_bps
    if steady < DELIVERY * payload:
        near = steady >= TRANSIENT_SHORTFALL * payload
        return [fidelity.Finding("rate", f"delivered {steady / 1e9:.3f} of the {payload / 1e9:.3f} Gbps of "
                                         f"payload a {rate_bps / 1e9:.2f} Gbps link carries (< {DELIVERY:.0%}; "
                                         f"{how}): the host, not the link, limited the flow",
                                 transient=near,
                                 measured=steady, limit=DELIVERY * payload)]
    return []


def run_duration_s(duration_s: float, rtt_ms: float) -> float:
    """A calibration run's length at a physical RTT: long enough to leave slow start."""
    return max(duration_s, MIN_RTTS_PER_RUN * rtt_ms / 1e3)


def faithful_rate(executor, run_dir: Path, *, rtt_ms: float, flows: int, duration_s: float,
                  start_bps: float, link: str | None = None, judged_at: int = 1, log=None) -> dict:
    """The highest rate on the search grid (search_grid), from start_bps down, at which a native-CUBIC
    run at p = 0 gets verdict ok (with the tolerances of a run dilated ``judged_at``-fold)
    and delivers its payload: start_bps itself first, then a bisection (geometric
    midpoints) between the grid's floor and the lowest flagged rate. ``executor(rtt_ms,
    duration_s, run_dir, flows, rate_bps, link, judged_at=...)`` runs one (the caller
    holds the host lock). Returns {"rate_bps": the rate or None when even the floor is
    flagged, "tried": [...]}."""
    log = log or (lambda m: None)
    tried = []

    def ok(rate: float) -> bool:
        for attempt in range(FAITHFUL_TRIES):
            try:
                rec = executor(rtt_ms, duration_s, Path(run_dir) / f"f{flows}-rtt{rtt_ms}-{link}-{rate:.0f}-{attempt}",
                               flows, rate, link, judged_at=judged_at)
            except BackendError as err:  # a run the host could not finish: not faithful
                rec = failed_record(err)
            # the verdict's link-busy check reads the same counters; delivered_shortfall says
            # it here, and also when a shortfall is too deep to be passing trouble
            findings = ([f for f in rec["fidelity"]["findings"] if f["check"] != "link busy"]
                        + [f.record() for f in delivered_shortfall(rec, rate)])
            reasons = [f["text"] for f in findings]
            # frames late only while the hypervisor held the engine's vCPU: the rate was
            # carried, and a lower one would meet the same stalls
            stalls_only = fidelity.host_stalls_only(findings)
            acks = rec["measured"].get("acks") or {}
            tried.append({"rate_bps": rate, "attempt": attempt + 1,
                          "verdict": "ok" if not reasons else "host stalls only" if stalls_only else "flagged",
                          "reasons": reasons, "transient": fidelity.transient_only(findings),
                          "steady_bps": rec["measured"]["steady_throughput_bps"],
                          "segments_per_ack": acks.get("receiver_segments_per_ack_steady"),
                          "cpu_stolen": rec["measured"].get("cpu_stolen")})
            log(f"calibration: {link or 'link'} {flows} flow(s) at {rtt_ms} ms, {rate / 1e9:.3g} Gbps: "
                f"{tried[-1]['verdict']}{' (' + '; '.join(reasons) + ')' if reasons else ''}")
            if not reasons or stalls_only or not fidelity.transient_only(findings):
                break
        return not reasons or stalls_only

    step, floor = search_grid(start_bps)
    top = max(floor, math.floor(start_bps / step) * step)
    if ok(top):
        return {"rate_bps": top, "tried": tried}
    good, bad = None, top
    while True:
        lower = good or floor
        mid = max(math.floor(math.sqrt(lower * bad) / step + 1e-9), round(lower / step) + 1) * step
        if mid >= bad - step / 2:
            break
        if ok(mid):
            good = mid
        else:
            bad = mid
    if good is None and floor < bad and ok(floor):
        good = floor
    if good is None and step == GRID_BPS:
        # even the floor was refused: a slow host (or guest) is searched below it on the
        # finer grid such a host gets (search_grid), once
        below = faithful_rate(executor, run_dir, rtt_ms=rtt_ms, flows=flows, duration_s=duration_s,
                              start_bps=0.995 * floor, link=link, judged_at=judged_at,
                              log=log)
        return {"rate_bps": below["rate_bps"], "tried": tried + below["tried"]}
    return {"rate_bps": good, "tried": tried}


def spell_hit(point: dict, link: str, points: list[dict]) -> bool:
    """Whether a point's search on ``link`` looks hit by a spell of host stalls: its result
    is below RESEARCH_SHARE of the median of the link's other points, and every rate below
    the search's top was refused for transient host trouble alone (a host that cannot
    carry a rate falls short of its payload or saturates a CPU, which is not transient;
    the load's own lateness at too high a rate looks like a stall, hence the neighbours)."""
    found = point["faithful"].get(link) or {}
    refused = [t for t in found.get("search", []) if t["verdict"] == "flagged"
               and t["rate_bps"] < (point.get("search_top_bps") or 0.0)]  # the top may be beyond the host
    others = [(p["faithful"].get(link) or {}).get("rate_bps") or 0.0 for p in points if p is not point]
    if "search_again" in found or not refused or not others:
        return False
    return ((found.get("rate_bps") or 0.0) < RESEARCH_SHARE * statistics.median(others)
            and all(t.get("transient") for t in refused))


def ports_rate(executor, run_dir: Path, *, rtt_ms: float, flows: int, duration_s: float,
               start_bps: float, link: str | None = None, log=None) -> dict:
    """The highest rate from start_bps down, in steps of PORTS_STEP on the search grid,
    at which ``flows`` PORTS_VARIANT ports filling the link at p = 0 pass the guard's
    check (fidelity.guard_check) and have their hooks run for all but PORTS_SKIP_SHARE of
    their acknowledged data (fidelity.skipped_share). ``executor(..., ports=True)`` runs
    one. Returns {"rate_bps": the rate or None when even the floor skips more, "tried":
    [...]}."""
    log = log or (lambda m: None)
    step, floor = search_grid(start_bps)
    tried, rate = [], max(floor, on_grid(start_bps, step))
    while True:
        try:
            rec = executor(rtt_ms, duration_s, Path(run_dir) / f"p{flows}-rtt{rtt_ms}-{link}-{rate:.0f}",
                           flows, rate, link, ports=True)
            guard = rec["measured"].get("cc_guard") or {}
        except BackendError as err:
            rec, guard = failed_record(err), {}
        failed = not any(guard.values())  # no port ran, or the run failed: nothing says the hooks ran
        skipped = max((fidelity.skipped_share(g) or 0.0 for g in guard.values() if g), default=None)
        finding = fidelity.guard_check(guard)
        ok = not failed and finding is None and skipped <= PORTS_SKIP_SHARE
        tried.append({"rate_bps": rate, "verdict": "ok" if ok else "flagged", "skipped_share": skipped,
                      "cc_guard": guard, "reasons": [str(finding)] if finding else [],
                      "run_reasons": rec["fidelity"]["reasons"],
                      "steady_bps": rec["measured"]["steady_throughput_bps"]})
        log(f"calibration: {link or 'link'} {flows} {PORTS_VARIANT}316 port(s) at {rtt_ms} ms, "
            f"{rate / 1e9:.3g} Gbps: " + ("the run failed" if failed else
                                          f"hooks skipped for {100 * skipped:.2f} % of the data"
                                          + (f", {finding}" if finding else "") + (" (ok)" if ok else "")))
        if ok:
            return {"rate_bps": rate, "tried": tried}
        lower = on_grid(rate * PORTS_STEP, step)
        if rate <= floor:
            if not_rate_bound(tried):
                log(f"calibration: {link or 'link'} ports at {rtt_ms} ms: as many hooks skipped at every "
                    f"rate, within the verdict's limit: not rate-bound, the link's ceiling")
                return {"rate_bps": tried[0]["rate_bps"], "tried": tried, "not_rate_bound": True}
            return {"rate_bps": None, "tried": tried}
        rate = max(floor, lower)


def not_rate_bound(tried: list[dict]) -> bool:
    """Whether a ports' search that found no rate within PORTS_SKIP_SHARE says the rate does
    not matter: every run passed the guard's check within the verdict's own limit, and the
    lower half of the rates tried skipped on average at least NOT_RATE_BOUND of the share
    the upper half did (CI's calibration, 2026-11-28, 2.2 ms: 1.44, 1.52, 1.73 % at 1-0.6
    Gbps, 1.31, 1.27, 1.58 % at 0.4-0.2: 0.89). Lowering the rate does not help there, so
    the ports' ceiling is the link's, and each run's guard judges it; a ceiling of 0 had
    flagged every port's run near that RTT for its rate."""
    shares = [t["skipped_share"] for t in tried]
    if len(shares) < 2 or any(t["reasons"] for t in tried) or \
            any(s is None or s > fidelity.GUARD_SHARE_MAX for s in shares):
        return False
    half = len(shares) // 2
    upper, lower = shares[:half], shares[-half:]
    return sum(lower) / half >= NOT_RATE_BOUND * sum(upper) / half


def failed_record(err: Exception) -> dict:
    """What a calibration run that failed counts as: flagged for it, nothing delivered (at
    193.6 ms and 3.6 Gbps, a one-BDP buffer of 169 MB, iperf3's control connection broke)."""
    failed = fidelity.Finding("run failed", str(err), transient=False)
    return {"fidelity": {"verdict": "flagged", "reasons": [str(failed)], "findings": [failed.record()]},
            "flows": [], "measured": {"steady_throughput_bps": 0.0, "rtt_ms": None, "acks": {}}}


class Progress:
    """Runs done of those expected, and the ETA: the time spent so far scaled by the share
    of the expected work done, each run weighted by its length plus RUN_SETUP_S (runs at
    a long RTT last longer: counting runs alone, the ETA said 9 min of 15)."""

    def __init__(self, expected_runs: int, expected_s: float, log):
        self.expected, self.expected_s, self.log = expected_runs, expected_s, log
        self.done, self.done_s, self.t0 = 0, 0.0, time.monotonic()

    def tick(self, what: str, run_s: float) -> None:
        self.done += 1
        self.done_s += run_s + RUN_SETUP_S
        spent = time.monotonic() - self.t0
        left = max(0.0, self.expected_s - self.done_s) * spent / self.done_s
        self.log(f"calibration: {what} [{self.done}/~{self.expected} runs, {spent / 60:.1f} min, "
                 f"ETA {left / 60:.0f} min]")

    def point_done(self, points_done: int, rest_s: list[float]) -> None:
        """After a grid point: expect as many runs per remaining point (of lengths
        ``rest_s``) as the points so far took on average (searches that retry take more
        than SEARCH_RUNS; counting the first estimate, the ETA read 0 min with three
        points to go)."""
        per_point = self.done / points_done
        self.expected = self.done + round(per_point * len(rest_s))
        self.expected_s = self.done_s + sum(per_point * (run_s + RUN_SETUP_S) for run_s in rest_s)


# A point searched again (see the module's docstring): its result is below this share of
# the median of its link's other points, and everything it refused was transient trouble
RESEARCH_SHARE = 0.5
SEARCH_RUNS = 6   # a bisection from the top on the 0.1 Gbps grid takes about this many
PORTS_RUNS = 2    # and the ports' ceiling below it
RUN_SETUP_S = 4.0  # a calibration run's set-up and teardown, for the ETA


def calibrate(executor, build_hashes: dict, *, duration_s: float = 4.0, links: tuple = LINKS,
              design: dict | None = None, log=None) -> dict:
    """Measure the envelope and cache it. ``executor(rtt_ms, duration_s, run_dir, flows,
    rate_bps=None, link=None)`` performs one run, unshaped without a rate (the caller holds
    the host lock), and returns its record."""
    log = log or (lambda m: None)
    # read once: the grid and each point's factor come from it, and the design may be
    # edited during the 20 minutes this takes (a later read failed a whole calibration)
    design = design if design is not None else load_design()
    key = host_key(build_hashes)
    points = []
    load_before = os.getloadavg()[0]
    todo = grid(design)
    per_point = 1 + (SEARCH_RUNS + PORTS_RUNS) * len(links)
    progress = Progress(len(todo) * per_point, sum(per_point * (run_duration_s(duration_s, rtt) + RUN_SETUP_S)
                                                   for _, rtt in todo), log)

    def counted(rtt_ms, dur, run_dir, flows, rate_bps=None, link=None, judged_at=1, ports=False):
        what = (f"{link or 'unshaped'} {flows} {'port' if ports else 'flow'}(s) {rtt_ms} ms"
                + (f" {rate_bps / 1e9:.3g} Gbps" if rate_bps else ""))
        try:
            rec = executor(rtt_ms, dur, run_dir, flows, rate_bps, link, judged_at=judged_at, ports=ports)
        except BackendError:
            progress.tick(f"{what}: failed", dur)
            raise
        add_stalls(stalls_by_run, rec)
        # a ports' run is judged by its guard alone (ports_rate logs that), not its verdict
        progress.tick(f"{what}: {'ran' if ports else rec['fidelity']['verdict']}", dur)
        return rec

    raw_most = {}  # flows -> the most an unshaped run of that many flows carried so far
    stalls_by_run = []  # every run's host stalls (add_stalls)

    def search_point(point: dict, link: str, again: bool = False) -> None:
        """The faithful rate of ``link`` at a point, then the ports' ceiling below it; a
        second search keeps the first's result where that was higher."""
        flows, rtt, dur = point["flows"], point["rtt_ms"], point["duration_s"]
        found = faithful_rate(counted, Path(tmp) / ("again" if again else "faithful"), rtt_ms=rtt, flows=flows,
                              duration_s=dur, start_bps=point["search_top_bps"], link=link,
                              judged_at=point["judged_at"], log=log)
        log(f"calibration: {link} faithful at {flows} flow(s), {rtt} ms"
            + (f" (judged as x{point['judged_at']})" if point["judged_at"] > 1 else "")
            + (" (searched again)" if again else "") + ": "
            + (f"{found['rate_bps'] / 1e9:.3g} Gbps" if found["rate_bps"] else "none"))
        if again:
            first = point["faithful"][link]
            first["search_again"] = found["tried"]
            if (found["rate_bps"] or 0) <= (first["rate_bps"] or 0):
                return
            first["rate_bps"] = found["rate_bps"]
        else:
            point["faithful"][link] = {"rate_bps": found["rate_bps"], "search": found["tried"]}
        if found["rate_bps"] and common.port_as() == "kmod":
            # the kernel calls a module's hooks itself: no ceiling below the link's
            point["faithful"][link].update(ports_rate_bps=found["rate_bps"], ports_search=[],
                                           ports_loaded_as="kmod")
        elif found["rate_bps"]:
            hooks = ports_rate(counted, Path(tmp) / "ports", rtt_ms=rtt, flows=flows, duration_s=dur,
                               start_bps=found["rate_bps"], link=link, log=log)
            point["faithful"][link].update(ports_rate_bps=hooks["rate_bps"], ports_search=hooks["tried"],
                                           **({"ports_not_rate_bound": True} if hooks.get("not_rate_bound") else {}))

    with tempfile.TemporaryDirectory(prefix="tcpeval-calibrate-") as tmp:
        for index, (flows, rtt) in enumerate(todo):
            dur = run_duration_s(duration_s, rtt)
            try:
                record = counted(rtt, dur, Path(tmp) / f"f{flows}-rtt{rtt}", flows)
            except BackendError as err:
                log(f"calibration: the unshaped run at {flows} flow(s), {rtt} ms failed ({err})")
                record = failed_record(err)
            m = record["measured"]
            # steady state (second half): slow start at long RTTs would understate the host
            bps = m["steady_throughput_bps"]
            point = {"flows": flows, "rtt_ms": rtt, "duration_s": dur, "throughput_bps": bps,
                     "mean_throughput_bps": sum(f["summary"]["mean_throughput_bps"] for f in record["flows"]),
                     "measured_rtt_ms": m["rtt_ms"], "cpu_busy": m.get("cpu_busy"),
                     "fidelity_reasons": record["fidelity"]["reasons"], "faithful": {},
                     "judged_at": judged_at(rtt, design)}
            # the top of the search: what the host carries at all. At a long RTT an unshaped
            # run has not left slow start when it ends (at 193.6 ms it read 0.2 Gbps), and a
            # longer path costs no more per packet: the most a shorter one carried counts
            raw_most[flows] = max(raw_most.get(flows, 0.0), bps or 0.0)
            point["search_top_bps"] = default_rate(raw_most[flows])
            for link in links:
                search_point(point, link)
            points.append(point)
            progress.point_done(index + 1, [run_duration_s(duration_s, r) for _, r in todo[index + 1:]])
        for point, link in [(p, link) for p in points for link in links if spell_hit(p, link, points)]:
            log(f"calibration: {link} at {point['flows']} flow(s), {point['rtt_ms']} ms refused only for "
                f"host trouble down to {(point['faithful'][link]['rate_bps'] or 0) / 1e9:.3g} Gbps: searching again")
            search_point(point, link, again=True)
    data = {"key": key, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host_capacity_bps": min(p["throughput_bps"] for p in points),
            "points": points, "links": list(links),
            "host_stalls": stall_totals(stalls_by_run),
            "loadavg_before": load_before, "loadavg_after": os.getloadavg()[0],
            "method": " ".join(__doc__.split("\n\n")[1].split())}
    data.update(summary(data, design))
    if not data["faithful_rate_bps"]:
        log(f"calibration: no rate down to {search_grid(0.995 * FAITHFUL_FLOOR_BPS)[1] / 1e9:g} Gbps came out faithful at "
            f"every point; runs use the floor and are judged as they come")
    path = cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_suffix(".tmp")
    tmp_path.write_text(json.dumps(data, indent=1))
    os.replace(tmp_path, path)
    data["cache_file"] = str(path)
    return data


def add_stalls(by_run: list, record: dict) -> None:
    """Add a run's host stalls (its link engine's list, tevdelay.c) to ``by_run`` as
    [watched s, [lengths ms]], each run apart: stalls come in spells, and
    dilation.stall_floor sets a spell's runs apart. A run without the list adds nothing."""
    listed = ((record.get("measured") or {}).get("delay_line") or {}).get("host_stalls") or {}
    if "length_us" in listed and listed.get("watched_ns"):
        by_run.append([round(listed["watched_ns"] / 1e9, 3), [round(us / 1e3, 3) for us in listed["length_us"]]])


def stall_totals(by_run: list) -> dict:
    """The calibration's `host_stalls` record: the runs' lists (by_run) and, for reading,
    their totals (runs, watched_s, every length sorted: length_ms)."""
    return {"runs": len(by_run), "watched_s": sum(s for s, _ in by_run),
            "length_ms": sorted(ms for _, lengths in by_run for ms in lengths), "by_run": by_run}


def stall_floor(cal: dict, rtt_ms: float) -> dict | None:
    """The least factor an `auto` run at ``rtt_ms`` (virtual) may take on this host for its
    stalls (dilation.stall_floor, against the verdict's stall check: stalls of
    fidelity.STALL_ROUND_TRIPS physical round trips or more, at most
    fidelity.STALL_RATE_MAX a virtual second); None without a record of them."""
    return dilation.stall_floor(cal.get("host_stalls"), rtt_ms, round_trips=fidelity.STALL_ROUND_TRIPS,
                                verdict_per_virtual_s=fidelity.STALL_RATE_MAX)


# ---- the envelope -----------------------------------------------------------------

def point_rate(point: dict, link: str, ports: bool = False) -> float:
    """A grid point's faithful rate on ``link`` (0: none), for runs with 3.16 ports the
    lower of it and the ports' ceiling (a calibration without one: the rate alone)."""
    found = point["faithful"].get(link) or {}
    rate = found.get("rate_bps") or 0.0
    if ports and "ports_rate_bps" in found:
        rate = min(rate, found["ports_rate_bps"] or 0.0)
    return rate


def envelope_rate(cal: dict, link: str, flows: int, rtt_ms: float, ports: bool = False) -> float:
    """What ``link`` carries faithfully for ``flows`` flows at physical RTT ``rtt_ms``
    (with ``ports``: flows of which some run a 3.16 port, point_rate): log-linear in the
    RTT between the grid's points of that flow count (more flows than measured: the
    largest count measured), the last point beyond the grid's longest RTT; 0 where a point
    found no faithful rate, and below the grid's shortest RTT: a path shorter than any the
    host was measured at is not known to be faithful (its own latency may be longer), so
    time dilation stretches it into the grid (shortest_rtt_ms)."""
    counts = sorted({p["flows"] for p in cal["points"]})
    n = max([c for c in counts if c <= flows] or counts[:1])
    pts = sorted((p["rtt_ms"], point_rate(p, link, ports)) for p in cal["points"] if p["flows"] == n)
    if rtt_ms < pts[0][0] * (1 - 1e-9):
        return 0.0
    if rtt_ms <= pts[0][0]:
        return pts[0][1]
    for (r0, v0), (r1, v1) in zip(pts, pts[1:]):
        if rtt_ms <= r1:
            w = math.log(rtt_ms / r0) / math.log(r1 / r0)
            return v0 + w * (v1 - v0)
    return pts[-1][1]


def shortest_rtt_ms(cal: dict) -> float:
    """The shortest physical RTT the calibration measured: below it the envelope is 0."""
    return min(p["rtt_ms"] for p in cal["points"])


def check_short_path(cal: dict, rtt_ms: float, setting) -> None:
    """Refuse a path shorter than the host was measured at that dilation cannot stretch
    into its grid (a forced factor, or one above the maximum), with the figures."""
    floor = shortest_rtt_ms(cal)
    factor = dilation.parse(setting)
    need = math.ceil(floor / rtt_ms - 1e-9) if rtt_ms > 0 else None
    reach = dilation.MAX_FACTOR if factor == dilation.AUTO else factor
    if rtt_ms > 0 and rtt_ms * reach >= floor * (1 - 1e-9):
        return
    how = (f"dilation: auto stretches it by at most {dilation.MAX_FACTOR}" if factor == dilation.AUTO
           else f"at dilation {factor} it runs at {rtt_ms * factor:.4g} ms")
    raise dilation.DilationError(
        f"rtt_ms: {rtt_ms:g} ms is shorter than any physical path this host was measured at (its calibration "
        f"grid starts at {floor:g} ms; below that its own latency may be the RTT) and {how}"
        + (f"; it needs a factor of at least {need}" if need else "")
        + " (or calibrate with a design that has this RTT: tcpeval calibrate --design)")


def choose(cal: dict, *, flows: int, rtt_ms: float, rate_bps: float | None, setting="auto",
           link: str | None = None, ports: bool = False) -> tuple[int, str, float]:
    """(k, link, what that link carries faithfully at k x rtt_ms) for a run (``ports``:
    one with 3.16 ports, envelope_rate): the mechanism with the smallest factor (a tie: the
    one with more headroom), or ``link`` if given. Raises dilation.DilationError as
    dilation.choose does."""
    best, refused = None, None
    for name in [link] if link else list(cal.get("links") or LINKS):
        def faithful_at(k, name=name):
            return envelope_rate(cal, name, flows, rtt_ms * k, ports)
        try:
            k = dilation.choose(setting, rate_bps, faithful_at)
        except dilation.DilationError as err:
            refused = err
            continue
        cap = faithful_at(k)
        if best is None or (k, -cap) < (best[0], -best[2]):
            best = (k, name, cap)
    if best is None:
        raise refused
    return best


def runs_ports(condition) -> bool:
    """Whether a condition runs a 3.16 port (whose hooks the host may skip)."""
    return any(f.protocol != "udp" and f.impl == "port" for f in condition.flows)


def factor_for(cal: dict, condition, rate_bps: float | None, link: str | None = None) -> tuple[int, str, float]:
    """choose() for a condition, as a run gets it: the mechanism ``link``, else
    $TCPEVAL_LINK, else the best, for the rate the flows can carry (the link's, or less
    where loss bounds them: dilation.rate_for_factor); refused (dilation.DilationError)
    where the condition cannot run so, as dilation.factor_for refuses native flows that
    would need k > 1."""
    flows = len(condition.flows)
    ports = runs_ports(condition)
    if rate_bps:  # an unshaped run (no rate) has no envelope to be inside
        check_short_path(cal, condition.rtt_ms, condition.dilation)
    # what the flows can carry, not the link, where loss bounds them below it
    rate_bps = dilation.rate_for_factor(condition, rate_bps)
    k, link, cap = choose(cal, flows=flows, rtt_ms=condition.rtt_ms, rate_bps=rate_bps,
                          setting=condition.dilation, link=link or forced_link(), ports=ports)
    dilation.factor_for(condition, rate_bps,
                        lambda kk: envelope_rate(cal, link, flows, condition.rtt_ms * kk, ports))
    return k, link, cap


# The default rate's share of the lowest faithful rate: calibration judges native CUBIC
# at p = 0; the 3.16 ports' bursts are harder on the host (highspeed316 at 6.2 ms / 1e-5
# and 1.2 Gbps, the engine's faithful rate there, was flagged in five attempts of five for
# departures held back 2 ms or more).
DEFAULT_SHARE = 0.8


def summary(cal: dict, design: dict | None = None) -> dict:
    """The envelope in a few numbers: per mechanism the lowest faithful rate over the
    design's own RTTs (no dilation), the mechanism a run without a rate uses (the higher
    of these), and DEFAULT_SHARE of that rate, rounded down to 0.1 Gbps, as the default
    bottleneck rate."""
    lo, hi = design_rtt_range(design)
    per_link = {}
    for link in cal.get("links") or LINKS:
        rates = [envelope_rate(cal, link, f, r) for f in GRID_FLOWS for r in (lo, hi)]
        rates += [(p["faithful"].get(link) or {}).get("rate_bps") or 0.0 for p in cal["points"]
                  if lo <= p["rtt_ms"] <= hi]
        per_link[link] = min(rates)
    link = max(per_link, key=lambda name: per_link[name])
    # a host that carries less than FAITHFUL_FLOOR_BPS faithfully gets its finer grid; one
    # that found nothing anywhere keeps the floor (runs there are judged as they come)
    step, floor = search_grid(per_link[link] or FAITHFUL_FLOOR_BPS)
    faithful = on_grid(per_link[link], step)
    default = on_grid(DEFAULT_SHARE * per_link[link], step)
    return {"faithful_by_link_bps": per_link, "link": link,
            "faithful_rate_bps": faithful or floor,
            "default_rate_bps": max(default, floor)}

