"""Cross-validation of time-dilated emulation (`make validate-dilation`; needs root).

Runs each port on the same conditions at k = 1 and at larger factors, and checks that the
virtual-path results agree (tcpeval.analysis.dilation_check: means within 5 %, per-interval
distributions by a two-sample KS test, loss-event counts). The conditions use a rate the
host carries faithfully at k = 1 (the calibrated default unless --rate), so that k = 1 is a
trustworthy reference. Repetition r uses the same drop seed at every factor.

Writes the traces under OUT/<variant>-<rtt>ms-<drop>-k<k>-r<rep>/, the comparison as
OUT/dilation-check.json and a figure OUT/dilation-check.{pdf,png}; prints a table and
exits 1 when a condition disagrees.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

VARIANTS = ("reno", "scalable", "highspeed", "htcp", "bic", "cubic")


def _floats(text):
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rtts", default="6.2,24.2", help="virtual RTTs in ms")
    ap.add_argument("--drops", default="0,1e-5,1e-3")
    ap.add_argument("--factors", default="2,4", help="factors compared with k = 1")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0, help="virtual seconds per run")
    ap.add_argument("--rate", default=None, help="virtual rate (default: the calibrated faithful rate)")
    ap.add_argument("--out", default=str(REPO / "results" / "dilation"))
    args = ap.parse_args(argv)

    from tcpeval import trace
    from tcpeval.analysis import dilation_check as dc
    from tcpeval.backends import get_backend
    from tcpeval.backends.cli import parse_rate
    from tcpeval.spec import adhoc_condition

    backend = get_backend("emulated", progress=False)
    rate = parse_rate(args.rate) if args.rate else backend.calibrate(force=False)["default_rate_bps"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    variants = [v for v in args.variants.split(",") if v]
    factors = [1] + [int(k) for k in args.factors.split(",") if k]
    conditions = [(v, rtt, p) for v in variants for rtt in _floats(args.rtts) for p in _floats(args.drops)]
    total = len(conditions) * len(factors) * args.reps
    print(f"{total} runs: {len(conditions)} conditions x factors {factors} x {args.reps} repetitions, "
          f"{args.duration:g} virtual s each at {rate / 1e9:.3g} Gbps", flush=True)
    done, t0, results = 0, time.monotonic(), []
    for variant, rtt, p in conditions:
        by_k = {}
        for k in factors:
            by_k[k] = []
            for rep in range(1, args.reps + 1):
                run_dir = out / f"{variant}-{rtt:g}ms-{p:g}-k{k}-r{rep}"
                if not (run_dir / "trace.json").exists():
                    cond = adhoc_condition([variant], rtt, p, args.duration, rate_bps=rate,
                                           seed=1000 + rep, rep=rep, dilation=k)
                    backend.run(cond, run_dir)
                by_k[k].append(trace.read_trace(run_dir))
                done += 1
                left = (time.monotonic() - t0) / done * (total - done)
                print(f"  [{done}/{total}] {run_dir.name}  ETA {left / 60:.0f} min", flush=True)
        for k in factors[1:]:
            cmp = dc.compare(by_k[1], by_k[k])
            results.append({"variant": variant, "rtt_ms": rtt, "drop": p, "rate_bps": rate, **cmp})
    summary = {"rate_bps": rate, "duration_s": args.duration, "reps": args.reps,
               "tolerances": {"mean": dc.MEAN_TOLERANCE, "ks_alpha": dc.KS_ALPHA,
                              "loss_sigmas": dc.LOSS_SIGMAS, "loss_tolerance": dc.LOSS_TOLERANCE},
               "results": results}
    (out / "dilation-check.json").write_text(json.dumps(summary, indent=1))
    print(f"\n{'variant':9s} {'RTT':>5s} {'drop':>6s} {'k':>3s} {'mean k=1':>9s} {'mean k':>9s} "
          f"{'diff':>6s} {'KS p':>6s} {'losses':>13s}  agree")
    for r in results:
        if not r["judged"]:
            print(f"{r['variant']:9s} {r['rtt_ms']:5g} {r['drop']:6g} {r['factor']:3d}  not judged: {r['why']} "
                  f"(verdicts {', '.join(r['verdicts'])})")
            continue
        print(f"{r['variant']:9s} {r['rtt_ms']:5g} {r['drop']:6g} {r['factor']:3d} "
              f"{r['mean_bps'][0] / 1e9:9.3f} {r['mean_bps'][1] / 1e9:9.3f} {100 * r['mean_rel_diff']:+5.1f}% "
              f"{r['ks_p']:6.3f} {r['loss_events'][0]:6d}/{r['loss_events'][1]:<6d}  ok runs {r['ok_runs'][0]}/{r['ok_runs'][1]}  "
              f"{'yes' if r['agree'] else 'NO: ' + ', '.join(c for c, ok in r['checks'].items() if not ok)}")
    _figure(results, out)
    bad = [r for r in results if not r["agree"]]
    print(f"\n{len(results) - len(bad)} of {len(results)} comparisons agree; {out / 'dilation-check.json'}")
    return 1 if bad else 0


def _figure(results, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 3.2))
    for k in sorted({r["factor"] for r in results}):
        rs = [r for r in results if r["factor"] == k]
        ax.scatter([r["mean_bps"][0] / 1e9 for r in rs], [r["mean_bps"][1] / 1e9 for r in rs],
                   label=f"k = {k}", s=14)
    results = [r for r in results if r["judged"]]
    top = max([max(r["mean_bps"]) for r in results] + [1e-3]) / 1e9 * 1.1
    ax.plot([0, top], [0, top], color="black", lw=0.8)
    ax.fill_between([0, top], [0, 0.95 * top], [0, 1.05 * top], color="grey", alpha=0.2, lw=0,
                    label="+-5 %")
    ax.set_xlabel("mean throughput, k = 1 (Gbps)")
    ax.set_ylabel("mean throughput, dilated (Gbps, virtual)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    for ext in ("pdf", "png"):
        fig.savefig(out / f"dilation-check.{ext}")


if __name__ == "__main__":
    sys.exit(main())
