"""Benchmark of time-dilated emulation (run by `make bench`; not a test; needs root).

The paper's 9.5 Gbps, virtual, at each of its RTTs with one and two CUBIC flows (the 3.16
port, dilation auto: the smallest factor that brings the rate within what the host
carries faithfully). Per point it prints the factor, the virtual steady-state throughput
(second half), the receivers' segments per ACK, the verdict and the wall time per virtual
second. Target: >= 9.0 Gbps virtual, 1.9-2.5 segments per ACK, verdict ok, at every RTT.
Writes results/bench/dilation-<host>-<time>.json, and keeps the run directory of every
point that misses the target beside it (dilation-<host>-<time>-missed/).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from tcpeval import spec  # noqa: E402  (after the sys.path line: runs from a checkout)
from tcpeval.backends.fidelity import SEGS_PER_ACK  # noqa: E402

RTTS = tuple(spec.load_design()["levels"]["rtt_ms"])  # the paper's RTTs
RATE_BPS = spec.load_design()["levels"]["link_bps"]   # the paper's link
TARGET_BPS = 9.0e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=4.0, help="virtual seconds per run")
    ap.add_argument("--rtts", default=",".join(map(str, RTTS)))
    ap.add_argument("--flows", default="1,2")
    ap.add_argument("--variant", default="cubic")
    ap.add_argument("--dilation", default="auto",
                    help="auto (the smallest factor that fits the calibrated faithful rate) or K, "
                         "e.g. a larger factor than auto picks where auto misses the target")
    ap.add_argument("--out", default=str(REPO / "results" / "bench"))
    args = ap.parse_args(argv)
    if args.dilation != "auto" and not (args.dilation.isdigit() and int(args.dilation) >= 1):
        ap.error(f"--dilation: 'auto' or a whole factor >= 1, got {args.dilation!r}")
    if os.geteuid() != 0:
        print("bench_dilation: needs root; skipped", file=sys.stderr)
        return 0
    from tcpeval import dilation
    from tcpeval.backends import get_backend
    from tcpeval.backends.base import BackendError
    from tcpeval.spec import adhoc_condition

    backend = get_backend("emulated", progress=False)
    cal = backend.calibrate(force=False)
    points = []
    stamp = f"dilation-{socket.gethostname()}-{time.strftime('%Y%m%dT%H%M%S')}"
    kept = Path(args.out) / f"{stamp}-missed"  # run directories of points that miss the target

    def keep(run_dir: Path) -> str | None:
        """Copy a missed point's run directory beside the results (a miss needs explaining)."""
        if not run_dir.exists():
            return None
        shutil.copytree(run_dir, kept / run_dir.name)
        return str(kept / run_dir.name)
    with tempfile.TemporaryDirectory(prefix="tcpeval-bench-dilation-") as tmp:
        for flows in (int(x) for x in args.flows.split(",")):
            for rtt in (float(x) for x in args.rtts.split(",")):
                cond = adhoc_condition([args.variant] * flows, rtt, 0.0, args.duration,
                                       rate_bps=RATE_BPS, seed=1,
                                       dilation=args.dilation if args.dilation == "auto" else int(args.dilation))
                t0 = time.monotonic()
                run_tmp = Path(tmp) / f"f{flows}-rtt{rtt}"
                try:
                    rec = backend.run(cond, run_tmp)
                except BackendError as e:  # a failed run is a missed point, not the end
                    points.append({"flows": flows, "rtt_ms": rtt, "factor": None, "steady_virtual_bps": 0.0,
                                   "run_dir": keep(run_tmp),
                                   "segments_per_ack": None, "verdict": "error", "reasons": [str(e)],
                                   "wall_s": time.monotonic() - t0, "wall_per_virtual_s": None, "met": False})
                    print(f"  {flows} flow(s) {rtt:>5} ms: run failed: {e}", file=sys.stderr, flush=True)
                    continue
                wall = time.monotonic() - t0 - (rec["measured"].get("lock_wait_s") or 0.0)
                k = dilation.factor(rec)
                v = dilation.to_virtual(rec)
                steady = v["measured"]["steady_throughput_bps"]
                spa = (rec["measured"].get("acks") or {}).get("receiver_segments_per_ack_steady")
                ok = (rec["fidelity"]["verdict"] == "ok" and steady >= TARGET_BPS
                      and spa is not None and SEGS_PER_ACK[0] <= spa <= SEGS_PER_ACK[1])
                points.append({"flows": flows, "rtt_ms": rtt, "factor": k, "steady_virtual_bps": steady,
                               "run_dir": None if ok else keep(run_tmp),
                               "segments_per_ack": spa, "verdict": rec["fidelity"]["verdict"],
                               "reasons": rec["fidelity"]["reasons"], "wall_s": wall,
                               "wall_per_virtual_s": wall / args.duration, "met": ok})
                print(f"  {flows} flow(s) {rtt:>5} ms: x{k}, {steady / 1e9:.2f} Gbps virtual, "
                      f"{'-' if spa is None else f'{spa:.2f}'} segs/ACK, {rec['fidelity']['verdict']}, "
                      f"{wall / args.duration:.0f} s wall per virtual s", file=sys.stderr, flush=True)
    print(f"\ntime-dilated emulation on {socket.gethostname()} ({os.cpu_count()} CPUs, "
          f"{platform.release()}): {args.variant} at {RATE_BPS / 1e9:g} Gbps virtual, "
          f"{args.duration:g} virtual s per run; faithful rate {cal['faithful_rate_bps'] / 1e9:.2f} Gbps; "
          f"dilation {args.dilation}")
    print(f"{'flows':>5} | {'RTT ms':>6} | {'factor':>6} | {'virtual Gbps':>12} | {'segs/ACK':>8} | "
          f"{'wall s / virtual s':>18} | verdict")
    for p in points:
        spa = "-" if p["segments_per_ack"] is None else f"{p['segments_per_ack']:.2f}"
        wall = "-" if p["wall_per_virtual_s"] is None else f"{p['wall_per_virtual_s']:.0f}"
        print(f"{p['flows']:>5} | {p['rtt_ms']:>6} | {p['factor'] or '-':>6} | {p['steady_virtual_bps'] / 1e9:>12.2f} | "
              f"{spa:>8} | {wall:>18} | {p['verdict']}"
              + (f" ({'; '.join(p['reasons'])})" if p["reasons"] else ""))
    met = all(p["met"] for p in points)
    print(f"target (>= {TARGET_BPS / 1e9:g} Gbps virtual, {SEGS_PER_ACK[0]}-{SEGS_PER_ACK[1]} segments "
          f"per ACK, verdict ok at every point): {'met' if met else 'NOT met'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stamp}.json"
    path.write_text(json.dumps({"host": socket.gethostname(), "kernel": platform.release(),
                                "cpus": os.cpu_count(), "rate_bps": RATE_BPS, "duration_s": args.duration,
                                "faithful_rate_bps": cal["faithful_rate_bps"], "dilation": args.dilation,
                                "points": points,
                                "met": met}, indent=1))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
