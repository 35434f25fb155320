"""Benchmark (run by `make bench`; not a test; needs root): the delay line's two release
rules side by side, in one run -- ACKs in batches (tevdelay.c, the default since
2026-11-26: each batch the frames due within a quantum Q after its first, Q = 1/40 of the
delay, at most 250 us) against one ACK or two at a time (the rule before: each frame as
soon as it is due within Q/2, Q = 1/200 of the delay, at most 50 us;
TCPEVAL_ACK_RELEASE=each).

Each condition runs with each rule in turn, --reps times (the host's figures drift over
minutes, so the two are interleaved): the CUBIC port at p = 0 on the link engine, 9.5 Gbps
virtual at a fixed factor. Per run: the inter-processor interrupts each CPU received
(/proc/interrupts: "function call" -- Receive Packet Steering handing the senders' CPU the
ACKs the engine's CPU released -- and "rescheduling"), each CPU's softirq share
(/proc/stat), the engine's idle time (its headroom), the link's departure lateness, the ACKs
per batch and the verdict. What the rule buys shows as fewer interrupts and more idle time
at the same rate; whether it buys a higher faithful rate is the calibration's to say
(bench_emulated.py). Writes results/bench/ack-batches-<host>-<time>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

# (virtual RTT ms, factor): a long path, where the quantum reaches its cap, and the paper's
# shortest, where it stays small
CONDITIONS = ((6.2, 5), (0.2, 6))
RATE_BPS = 9.5e9


def interrupts() -> dict:
    """{"CAL": [per CPU], "RES": [...]} from /proc/interrupts."""
    out = {}
    for line in Path("/proc/interrupts").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() in ("CAL", "RES"):
            out[name.strip()] = [int(x) for x in rest.split()[:os.cpu_count() or 1]]
    return out


def cpu_times() -> list[list[int]]:
    """Per CPU: user, nice, system, idle, iowait, irq, softirq, steal (USER_HZ ticks)."""
    return [[int(x) for x in line.split()[1:9]] for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("cpu") and line[3].isdigit()]


def one_run(backend, rule: str, rtt_ms: float, k: int, duration: float, run_dir: Path) -> dict:
    from tcpeval.backends.emulated.delay import RELEASE_ENV
    from tcpeval.spec import adhoc_condition

    os.environ[RELEASE_ENV] = rule
    cond = adhoc_condition(["cubic"], rtt_ms, 0.0, duration, rate_bps=RATE_BPS, seed=1, dilation=k)
    irq0, cpu0 = interrupts(), cpu_times()
    rec = backend.run(cond, run_dir)
    irq1, cpu1 = interrupts(), cpu_times()
    line = rec["measured"]["delay_line"]
    link = line.get("link") or {}
    softirq = []
    for a, b in zip(cpu0, cpu1):
        d = [y - x for x, y in zip(a, b)]
        softirq.append(d[6] / sum(d) if sum(d) else 0.0)
    return {"rule": rule, "rtt_ms": rtt_ms, "factor": k, "verdict": rec["fidelity"]["verdict"],
            "reasons": rec["fidelity"]["reasons"], "quantum_us": line["quantum_ns"] / 1e3,
            "acks_per_batch": line["forwarded"] / line["batches"] if line.get("batches") else None,
            "function_call_irqs": [y - x for x, y in zip(irq0["CAL"], irq1["CAL"])],
            "reschedule_irqs": [y - x for x, y in zip(irq0["RES"], irq1["RES"])],
            "softirq_share": softirq, "traffic_s": rec["measured"]["traffic_s"],
            "engine_idle_share": (link.get("idle_ns") or 0) / 1e9 / rec["measured"]["traffic_s"],
            "late_us": [link.get("late_us_p50"), link.get("late_us_p99"), link.get("late_us_p999")],
            "late_share": (link.get("late_ge_ms") or {}).get(format(0.5 * k, "g"), 0) / max(1, link.get("sent") or 0),
            "virtual_gbps": rec["flows"][0]["summary"]["mean_throughput_bps"] * k / 1e9}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=2, help="runs per rule and condition")
    ap.add_argument("--duration", type=float, default=8.0, help="virtual seconds per run")
    ap.add_argument("--out", default=str(REPO / "results" / "bench"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_ack_batches: needs root; skipped", file=sys.stderr)
        return 0
    from tcpeval.backends import get_backend
    from tcpeval.backends.emulated.bottleneck import LINK_ENV

    os.environ[LINK_ENV] = "tevlink"
    backend = get_backend("emulated", progress=False, attempts=1)
    runs = []
    with tempfile.TemporaryDirectory(prefix="tcpeval-bench-acks-") as tmp:
        for rtt, k in CONDITIONS:
            for rep in range(args.reps):
                for rule in ("each", "batch"):
                    r = one_run(backend, rule, rtt, k, args.duration, Path(tmp) / f"{rule}-{rtt}-{rep}")
                    runs.append(r)
                    print(f"  {rule:>5} {rtt} ms x{k}: {r['function_call_irqs']} function-call interrupts, "
                          f"engine idle {r['engine_idle_share']:.0%}, {r['verdict']}", file=sys.stderr, flush=True)
    print(f"\nACK release rules on {socket.gethostname()} ({os.cpu_count()} CPUs): cubic316, "
          f"{RATE_BPS / 1e9:g} Gbps virtual, p = 0, link engine; medians of {args.reps} runs each")
    print(f"{'RTT ms':>6} | {'k':>2} | {'rule':>5} | {'Q us':>5} | {'ACKs/batch':>10} | {'fn-call irqs/s':>14} | "
          f"{'softirq CPU0/1':>14} | {'engine idle':>11} | {'late us p50/p99/p99.9':>21} | ok")
    for rtt, k in CONDITIONS:
        for rule in ("each", "batch"):
            rs = [r for r in runs if r["rtt_ms"] == rtt and r["rule"] == rule]

            def med(f, rs=rs):
                return statistics.median(f(r) for r in rs)
            late = "/".join(f"{med(lambda r, i=i: r['late_us'][i] or 0):g}" for i in range(3))
            print(f"{rtt:>6g} | {k:>2} | {rule:>5} | {med(lambda r: r['quantum_us']):>5.0f} | "
                  f"{med(lambda r: r['acks_per_batch'] or 0):>10.1f} | "
                  f"{med(lambda r: sum(r['function_call_irqs']) / r['traffic_s']):>14,.0f} | "
                  f"{med(lambda r: r['softirq_share'][0]):>6.0%} /{med(lambda r: r['softirq_share'][-1]):>6.0%} | "
                  f"{med(lambda r: r['engine_idle_share']):>11.0%} | {late:>21} | "
                  f"{sum(r['verdict'] == 'ok' for r in rs)}/{len(rs)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"ack-batches-{socket.gethostname()}-{time.strftime('%Y%m%dT%H%M%S')}.json"
    path.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": runs}, indent=1))
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
