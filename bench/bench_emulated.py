"""Benchmark of the emulated backend (run by `make bench`; not a test; needs root): the
link mechanisms side by side, in one run -- TBF against the link engine with scheduled
departures (tevlink; backends/emulated/bottleneck.py).

1. The faithful envelope: this host's calibration (`tcpeval calibrate`, run first unless
   one is cached, or anew with --calibrate): per (flows, physical RTT) the raw capacity
   (unshaped) and, per mechanism, the highest rate whose runs come out with verdict ok
   and deliver their payload (calibrate.faithful_rate). Only that is a benchmark rate.
2. At each mechanism's faithful rate, at the design's shortest and longest RTT (one flow),
   one run each: host CPU per packet (busy CPU time, less the engine's idle spinning,
   over the frames the link sent), the departures' lateness against the link's schedule
   (p50/p99/p99.9; TBF keeps no schedule to measure against), the senders' loaded RTT
   against what the path allows, the verdict.
3. The factor each condition of the paper campaign gets with each mechanism (and with the
   best of both, as runs choose), and the campaign's wall time on this one host.
4. Fixed overhead per run: wall time of a complete short run minus its traffic time.

Targets on the 2-vCPU development VM (issue 24): >= 1.5 Gbps faithful at every point of
the envelope, departure lateness p99.9 <= 50 us, the paper campaign <= 100 host-days.
Prints tables and writes results/bench/emulated-<host>-<time>.json. Before and after, the
host without the emulator (reference.measure: a veth pair, one forwarding hop) as a
yardstick: the same VM has carried 5.8 Gbps through that hop on one day and 3.4 on
another.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from tcpeval import spec  # noqa: E402  (after the sys.path line: runs from a checkout)

TARGET_FAITHFUL_BPS = 1.5e9
TARGET_LATE_P999_US = 50
TARGET_PAPER_DAYS = 100
TARGET_OVERHEAD_S = 2.0


def _gbps(bps: float | None) -> str:
    return "-" if not bps else f"{bps / 1e9:.1f}"


def run_at(backend, art, link: str, rtt: float, rate: float, duration: float, run_dir: Path) -> dict:
    """One native-CUBIC run at p = 0 on ``link`` at ``rate``: what it cost and how late."""
    from tcpeval.backends.emulated import host
    with host.HostLock(backend.lock_timeout_s):
        host.cleanup_stale(holding_lock=True)
        rec = backend._executor(art)(rtt, duration, run_dir, 1, rate, link)
    m = rec["measured"]
    dl = m.get("delay_line") or {}
    eng = dl.get("link") or {}
    if eng:
        frames, idle_s = eng.get("sent") or 0, (eng.get("idle_ns") or 0) / 1e9
    else:
        q = m.get("bottleneck_qdisc") or {}
        frames, idle_s = ((q.get("after") or {}).get("packets") or 0) - ((q.get("before") or {}).get("packets") or 0), 0.0
    busy_s = (m.get("cpu_busy") or 0) * (os.cpu_count() or 1) * m["traffic_s"]
    loaded = [f for f in ((m.get("loaded_rtt") or {}).get("flows") or {}).values() if f]
    return {"link": link, "rtt_ms": rtt, "rate_bps": rate, "verdict": rec["fidelity"]["verdict"],
            "reasons": rec["fidelity"]["reasons"], "frames": frames,
            "cpu_us_per_packet": 1e6 * max(0.0, busy_s - idle_s) / frames if frames else None,
            "late_us": [eng.get("late_us_p50"), eng.get("late_us_p99"), eng.get("late_us_p999")] if eng else None,
            "loaded_rtt_ms": loaded[0]["quantile_ms"] if loaded else None,
            "loaded_rtt_bound_ms": (m.get("loaded_rtt") or {}).get("bound_ms"),
            "link_steady_bps": (m.get("link_steady") or {}).get("bps")}


def campaign_cost(cal: dict, link: str | None) -> dict:
    """Factors and wall time of the paper campaign on this host, with one mechanism (or,
    link None, each run's best)."""
    from tcpeval.backends import planning
    ceil = planning.Ceiling(cal["faithful_rate_bps"], cal["default_rate_bps"], "bench", calibration=cal, link=link)
    plans = [planning.plan_run(cond, ceil) for cond in spec.expand(spec.load_design(), "paper")]
    return {"factors": dict(sorted(Counter(p.factor for p in plans).items())),
            "wall_days": sum(p.wall_s for p in plans) / 86400}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibrate", action="store_true", help="calibrate anew even if a calibration is cached")
    ap.add_argument("--duration", type=float, default=6.0, help="seconds per run at a faithful rate")
    ap.add_argument("--overhead-runs", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "results" / "bench"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_emulated: needs root; skipped", file=sys.stderr)
        return 0
    from tcpeval.backends import get_backend
    from tcpeval.backends.emulated import calibrate, reference
    from tcpeval.backends.emulated.build import ensure_built
    from tcpeval.spec import adhoc_condition

    backend = get_backend("emulated", progress=True)
    art = ensure_built()
    refs = [reference.measure(6.0)]
    t_cal = time.monotonic()
    cal = backend.calibrate(force=args.calibrate)
    cal_s = time.monotonic() - t_cal
    links = cal["links"]
    lo, hi = calibrate.design_rtt_range()
    probes = []
    with tempfile.TemporaryDirectory(prefix="tcpeval-bench-") as tmp:
        for link in links:
            for rtt in (lo, hi):
                rate = calibrate.envelope_rate(cal, link, 1, rtt)
                if not rate:
                    continue
                probes.append(run_at(backend, art, link, rtt, rate, args.duration, Path(tmp) / f"{link}-{rtt}"))
                p = probes[-1]
                print(f"  {link} {rtt} ms at {rate / 1e9:.1f} Gbps: {p['verdict']}, "
                      f"{p['cpu_us_per_packet'] or 0:.1f} us CPU per packet", file=sys.stderr, flush=True)
        refs.append(reference.measure(6.0))
        overheads = []
        for k in range(args.overhead_runs):
            cond = adhoc_condition(["cubic"], 6.2, 0.0, 1.0, impl="native", rate_bps=0.5e9, seed=1,
                                   dilation=1)  # overhead only: real time, whatever the rate
            t0 = time.monotonic()
            rec = backend.run(cond, Path(tmp) / f"overhead{k}")
            wall = time.monotonic() - t0
            lock_wait = rec["measured"].get("lock_wait_s") or 0.0
            overheads.append({"wall_s": wall, "traffic_s": rec["measured"]["traffic_s"], "lock_wait_s": lock_wait,
                              "overhead_s": wall - rec["measured"]["traffic_s"] - lock_wait})
    costs = {name: campaign_cost(cal, name) for name in links}
    costs["best"] = campaign_cost(cal, None)
    overhead = statistics.median(o["overhead_s"] for o in overheads)
    faithful_min = {name: min((p["faithful"].get(name) or {}).get("rate_bps") or 0 for p in cal["points"])
                    for name in links}
    engine = [p for p in probes if p["link"] == "tevlink" and p["late_us"]]
    result = {
        "host": socket.gethostname(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "calibration": {k: cal[k] for k in (
            "measured_at", "points", "links", "link", "default_rate_bps", "faithful_by_link_bps")},
        "calibration_wall_s": cal_s, "host_reference": refs, "probes": probes, "paper_campaign": costs,
        "overhead_runs": overheads, "overhead_median_s": overhead,
        "targets": {"faithful_bps_every_point": TARGET_FAITHFUL_BPS, "late_p999_us": TARGET_LATE_P999_US,
                    "paper_days": TARGET_PAPER_DAYS, "overhead_s": TARGET_OVERHEAD_S},
        "met": {"faithful_bps_every_point": faithful_min.get("tevlink", 0) >= TARGET_FAITHFUL_BPS,
                "late_p999_us": bool(engine) and all(p["late_us"][2] <= TARGET_LATE_P999_US for p in engine),
                "paper_days": costs["best"]["wall_days"] <= TARGET_PAPER_DAYS,
                "overhead_s": overhead < TARGET_OVERHEAD_S},
    }
    print(f"\nemulated backend on {result['host']} ({result['cpus']} CPUs, {result['kernel']}); "
          f"calibration of {cal['measured_at']}" + (f" ({cal_s / 60:.0f} min)" if cal_s > 60 else " (cached)"))
    print("host without the emulator (before / after): direct "
          + " / ".join(f"{r['direct_bps'] / 1e9:.2f}" for r in refs) + " Gbps, forwarding hop "
          + " / ".join(f"{r['forwarding_bps'] / 1e9:.2f}" for r in refs) + " Gbps")
    print("\nfaithful envelope (Gbps): raw = unshaped steady state; per mechanism the highest faithful rate")
    print(f"{'flows':>5} | {'RTT ms':>7} | {'raw':>5} | " + " | ".join(f"{name:>8}" for name in links))
    for p in cal["points"]:
        print(f"{p['flows']:>5} | {p['rtt_ms']:>7g} | {p['throughput_bps'] / 1e9:>5.2f} | "
              + " | ".join(f"{_gbps((p['faithful'].get(name) or {}).get('rate_bps')):>8}" for name in links))
    print("\nat each mechanism's faithful rate, 1 flow (CPU per packet host-wide; lateness against the schedule)")
    print(f"{'link':>8} | {'RTT ms':>6} | {'Gbps':>5} | {'us CPU/pkt':>10} | {'late us p50/p99/p99.9':>21} | "
          f"{'loaded RTT / allowed ms':>23} | verdict")
    for p in probes:
        late = "-" if not p["late_us"] else "/".join(f"{x:g}" for x in p["late_us"])
        lr = "-" if p["loaded_rtt_ms"] is None else f"{p['loaded_rtt_ms']:.2f} / {p['loaded_rtt_bound_ms']:.2f}"
        print(f"{p['link']:>8} | {p['rtt_ms']:>6g} | {p['rate_bps'] / 1e9:>5.1f} | "
              f"{'-' if p['cpu_us_per_packet'] is None else format(p['cpu_us_per_packet'], '.1f'):>10} | "
              f"{late:>21} | {lr:>23} | {p['verdict']}" + (f" ({'; '.join(p['reasons'])})" if p["reasons"] else ""))
    print("\nthe paper campaign (1,280 runs at 9.5 Gbps) on this one host")
    print(f"{'link':>8} | {'host-days':>9} | factors (runs)")
    for name, c in costs.items():
        print(f"{name:>8} | {c['wall_days']:>9.1f} | " + ", ".join(f"x{k}: {n}" for k, n in c["factors"].items()))
    print(f"\noverhead per run (median of {len(overheads)}): {overhead:.2f} s")
    met = result["met"]
    print(f"targets: >= {TARGET_FAITHFUL_BPS / 1e9:g} Gbps faithful at every point (tevlink, lowest "
          f"{_gbps(faithful_min.get('tevlink'))}): {'met' if met['faithful_bps_every_point'] else 'NOT met'}; "
          f"lateness p99.9 <= {TARGET_LATE_P999_US} us: {'met' if met['late_p999_us'] else 'NOT met'}; "
          f"paper campaign <= {TARGET_PAPER_DAYS} host-days: {'met' if met['paper_days'] else 'NOT met'}; "
          f"overhead < {TARGET_OVERHEAD_S} s: {'met' if met['overhead_s'] else 'NOT met'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"emulated-{result['host']}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
