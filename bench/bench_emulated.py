"""Benchmark of the emulated backend (run by `make bench`; not a test; needs root).

1. Highest bottleneck rate the host carries on the per-packet path (offloads off, BPF
   dropper enabled at p = 0, the delay mechanism in place, no rate limit) at each RTT of
   the paper, with 1 and 2 native-CUBIC flows; the aggregate steady-state throughput
   (second half of the run) is what the host sustains.
2. Fixed overhead per run: wall time of a complete short run minus its traffic time
   (preflight, build check, lock, namespaces, qdiscs, BPF, RTT measurement, teardown,
   trace writing), median of several runs.

Targets on the 2-core development host: >= 5 Gbps at 24.2 ms with one flow; overhead
< 2 s per run. Prints a table and writes results/bench/emulated-<host>-<time>.json.
Throughput depends on what else runs on the host: next to each point the benchmark
records the load average and the share of the host's CPU time that other tenants'
processes (not this benchmark's process tree, not kernel threads) used during it.
The overhead excludes time spent waiting for the host lock (other experiments).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

RTTS = (0.2, 6.2, 12.2, 24.2)
TARGET_GBPS_24MS = 5.0
TARGET_OVERHEAD_S = 2.0


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _proc_times() -> dict:
    """pid -> (ppid, utime + stime ticks) of every process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(d.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return out


def _ours(procs: dict) -> set:
    me, ours, grew = os.getpid(), {os.getpid()}, True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                grew = True
    return ours | {me}


class ForeignLoad:
    """CPU share used by other tenants' processes between start() and stop()."""

    def start(self):
        self.t0, self.p0 = time.monotonic(), _proc_times()

    def stop(self) -> float:
        p1, wall = _proc_times(), time.monotonic() - self.t0
        ours = _ours(p1) | _ours(self.p0)
        ticks = 0
        for pid, (ppid, t) in p1.items():
            if pid in ours or ppid == 2 or pid == 2:  # ours, or a kernel thread
                continue
            ticks += t - self.p0.get(pid, (0, 0))[1]
        return ticks / os.sysconf("SC_CLK_TCK") / (wall * (os.cpu_count() or 1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=6.0, help="seconds per throughput point")
    ap.add_argument("--overhead-runs", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "results" / "bench"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_emulated: needs root; skipped", file=sys.stderr)
        return 0
    from tcpeval.backends import get_backend
    from tcpeval.spec import adhoc_condition

    backend = get_backend("emulated", progress=False)
    points = []
    with tempfile.TemporaryDirectory(prefix="tcpeval-bench-") as tmp:
        for flows in (1, 2):
            for rtt in RTTS:
                la = loadavg()
                fl = ForeignLoad()
                fl.start()
                rec = backend.unshaped(Path(tmp) / f"f{flows}-rtt{rtt}", rtt_ms=rtt,
                                       duration_s=args.duration, flows=flows)
                foreign = fl.stop()
                m = rec["measured"]
                dl = m.get("delay_line") or {}
                fwd = dl.get("forwarded") or 0
                from tcpeval.backends.fidelity import late_frames
                point = {"flows": flows, "rtt_ms": rtt, "steady_bps": m["steady_throughput_bps"],
                         "mean_bps": m["bottleneck_rate_bps"], "rtt_measured_ms": m["rtt_ms"],
                         "cpu_busy": m["cpu_busy"], "loadavg_before": la, "foreign_cpu_share": foreign,
                         "placement": rec["mechanisms"].get("placement"),
                         "delay_mechanism": rec["mechanisms"]["delay"],
                         "delay_late_share": (late_frames(dl) / fwd) if fwd else None,
                         "delay_mean_error_us": (dl.get("mean_error_ns") or 0) / 1e3 if dl else None,
                         "fidelity": rec["fidelity"]["verdict"], "reasons": rec["fidelity"]["reasons"]}
                points.append(point)
                print(f"  {flows} flow(s) {rtt:>5} ms: {point['steady_bps'] / 1e9:5.2f} Gbps "
                      f"(cpu {point['cpu_busy']:.0%}, other tenants {foreign:.0%}, load {la:.1f})",
                      file=sys.stderr, flush=True)
        backend.calibrate(force=False)  # a due calibration is not per-run overhead
        overheads = []
        for k in range(args.overhead_runs):
            cond = adhoc_condition(["cubic"], 6.2, 0.0, 1.0, impl="native", rate_bps=1e9, seed=1)
            t0 = time.monotonic()
            rec = backend.run(cond, Path(tmp) / f"overhead{k}")
            wall = time.monotonic() - t0
            lock_wait = rec["measured"].get("lock_wait_s") or 0.0
            overheads.append({"wall_s": wall, "traffic_s": rec["measured"]["traffic_s"],
                              "lock_wait_s": lock_wait,
                              "overhead_s": wall - rec["measured"]["traffic_s"] - lock_wait,
                              "setup_s": rec["measured"]["setup_s"], "teardown_s": rec["measured"]["teardown_s"]})
    overhead = statistics.median(o["overhead_s"] for o in overheads)
    waits = ", ".join(f"{o['lock_wait_s']:.1f}" for o in overheads)
    one_24 = next(p for p in points if p["flows"] == 1 and p["rtt_ms"] == 24.2)
    result = {
        "host": socket.gethostname(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "duration_s": args.duration,
        "points": points, "overhead_runs": overheads, "overhead_median_s": overhead,
        "targets": {"gbps_24ms_1flow": TARGET_GBPS_24MS, "overhead_s": TARGET_OVERHEAD_S},
        "met": {"gbps_24ms_1flow": one_24["steady_bps"] / 1e9 >= TARGET_GBPS_24MS,
                "overhead_s": overhead < TARGET_OVERHEAD_S},
    }
    print(f"\nemulated backend on {result['host']} ({result['cpus']} CPUs, {result['kernel']}), "
          f"{args.duration:g} s per point, delay: {points[0]['delay_mechanism']}")
    print(f"{'RTT ms':>7} | {'1 flow Gbps':>11} | {'2 flows Gbps':>12} | {'cpu busy (1/2)':>14} | "
          f"{'others (1/2)':>12} | {'late>0.5ms (1/2)':>16}")
    for rtt in RTTS:
        a = next(p for p in points if p["flows"] == 1 and p["rtt_ms"] == rtt)
        b = next(p for p in points if p["flows"] == 2 and p["rtt_ms"] == rtt)
        late = lambda p: "-" if p["delay_late_share"] is None else f"{p['delay_late_share']:.1%}"
        print(f"{rtt:>7} | {a['steady_bps'] / 1e9:>11.2f} | {b['steady_bps'] / 1e9:>12.2f} | "
              f"{a['cpu_busy']:>6.0%} /{b['cpu_busy']:>5.0%} | {a['foreign_cpu_share']:>5.0%} /{b['foreign_cpu_share']:>5.0%} | "
              f"{late(a):>7} / {late(b):>6}")
    print(f"overhead per run (median of {len(overheads)}): {overhead:.2f} s "
          f"(setup {statistics.median(o['setup_s'] for o in overheads):.2f} s, "
          f"teardown {statistics.median(o['teardown_s'] for o in overheads):.2f} s; "
          f"lock waits excluded: {waits} s)")
    print(f"targets: >= {TARGET_GBPS_24MS} Gbps at 24.2 ms, 1 flow: {'met' if result['met']['gbps_24ms_1flow'] else 'NOT met'}; "
          f"overhead < {TARGET_OVERHEAD_S} s: {'met' if result['met']['overhead_s'] else 'NOT met'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"emulated-{result['host']}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
