"""Benchmark of the analysis at paper scale (run by `make bench`; not a test).

1,280 synthetic traces of the paper campaign at paper duration (900 s, 0.1 s intervals:
9,000 samples per flow) are generated once into a cache directory; then, each in a child
process so that peak memory is its own:

  per-run   every trace -> per-run Parquet (what the 1,280 `metrics_run` jobs do), in one
            process, and with 2 worker processes (the 2 cores)
  phases    where per-run time goes, on a sample of traces: read, JSON parse, contract
            check, metrics, Parquet write
  gather    per-run files -> runs / flows / samples tables
  rebuild   figures + tables + claims + macros + latexmk from the cached tables, as the
            Snakemake jobs run them (one `tcpeval` process each)
  startup   one `tcpeval metrics run` process, to estimate the per-job overhead of the
            workflow's 1,280 per-run jobs

Targets: metrics for all runs < 60 s and < 2 GiB; paper rebuild < 60 s.
Writes results/bench/analysis.json.

    python bench/bench_analysis.py [--cache DIR] [--runs N] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
TCPEVAL = [str(Path(sys.executable).parent / "tcpeval")]
GIB = 1024 ** 3


def _child(argv: list[str], **kw) -> tuple[float, float, str]:
    """Run a child; (wall seconds, peak RSS of that child in bytes, stdout)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, **kw)
        # wait4: this child's own rusage (its peak RSS includes its worker processes only
        # if they are waited for by it; pool workers are reported separately by the OS)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{stdout[-2000:]}\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss * 1024.0, stdout


# ---------------------------------------------------------------------------- child entry points

def _per_run_all(traces_file: str, out_root: str, workers: int) -> None:
    from tcpeval.analysis import tidy

    traces = Path(traces_file).read_text().split()
    jobs = [(t, f"{out_root}/{i:05d}") for i, t in enumerate(traces)]
    if workers <= 1:
        for t, o in jobs:
            tidy.write_run(t, o)
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers) as pool:
            list(pool.map(_one, jobs, chunksize=16))


def _one(job):
    from tcpeval.analysis import tidy

    tidy.write_run(*job)


def _phases(traces_file: str, n: int) -> None:
    import orjson

    from tcpeval.analysis import extract, tidy

    traces = Path(traces_file).read_text().split()[:: max(1, len(Path(traces_file).read_text().split()) // n)][:n]
    acc = dict(read=0.0, parse=0.0, validate=0.0, metrics=0.0, write=0.0)
    tmp = tempfile.mkdtemp()
    for i, t in enumerate(traces):
        t0 = time.perf_counter()
        raw = Path(t).read_bytes()
        t1 = time.perf_counter()
        rec = orjson.loads(raw)
        t2 = time.perf_counter()
        extract.validate_fast(rec, t)
        t3 = time.perf_counter()
        row, flows, samples = extract.summarise(rec, t)
        t4 = time.perf_counter()
        out = Path(tmp) / str(i)
        out.mkdir()
        tidy._write_atomic(tidy._row_table([row], tidy.RUN_SCHEMA), out / "run.parquet")
        tidy._write_atomic(tidy._row_table(flows, tidy.FLOW_SCHEMA), out / "flows.parquet")
        tidy._write_atomic(tidy._sample_table(samples), out / "samples.parquet")
        t5 = time.perf_counter()
        for k, a, b in (("read", t0, t1), ("parse", t1, t2), ("validate", t2, t3), ("metrics", t3, t4),
                        ("write", t4, t5)):
            acc[k] += b - a
    shutil.rmtree(tmp)
    print(json.dumps({k: v / len(traces) for k, v in acc.items()}))


def _gather(out_root: str, target: str) -> None:
    from tcpeval.analysis import tidy

    dirs = sorted(str(p) for p in Path(out_root).iterdir())
    tidy.gather(dirs, target)


# ---------------------------------------------------------------------------- driver

def generate(cache: Path, n_runs: int | None) -> list[str]:
    from tcpeval import paths, spec
    from tcpeval.analysis import synthetic

    design = spec.load_design()
    conds = spec.expand(design, "paper", "emulated")[:n_runs]
    marker = cache / f"complete-{len(conds)}"
    traces = [str(cache / paths.run_dir(c, ".") / "trace.json") for c in conds]
    if not marker.exists():
        t0 = time.perf_counter()
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
        synthetic.write_traces(conds, cache, fast=True, flag_every=50)
        marker.write_text("")
        print(f"generated {len(conds)} traces in {time.perf_counter() - t0:.0f} s under {cache}")
    return traces


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=os.environ.get("TCPEVAL_BENCH_CACHE", "/tmp/tcpeval-bench-traces"))
    ap.add_argument("--runs", type=int, help="only the first N runs of the paper campaign")
    ap.add_argument("--keep", action="store_true", help="keep the trace cache (default: keep; --clean removes)")
    ap.add_argument("--clean", action="store_true", help="remove the trace cache afterwards")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        fn = {"per_run": _per_run_all, "phases": _phases, "gather": _gather}[args.child[0]]
        conv = [int(a) if a.isdigit() else a for a in args.child[1:]]
        fn(*conv)
        return 0

    cache = Path(args.cache)
    traces = generate(cache, args.runs)
    work = Path(tempfile.mkdtemp(prefix="tcpeval-bench-"))
    tlist = work / "traces.txt"
    tlist.write_text("\n".join(traces))
    size = sum(Path(t).stat().st_size for t in traces)
    me = [sys.executable, str(Path(__file__).resolve()), "--child"]
    rows = {}

    wall, rss, _ = _child(me + ["per_run", str(tlist), str(work / "perrun1"), "1"])
    rows["per-run, 1 process"] = (wall, rss)
    shutil.rmtree(work / "perrun1")
    wall2, rss2, _ = _child(me + ["per_run", str(tlist), str(work / "perrun"), "2"])
    rows["per-run, 2 workers"] = (wall2, rss2)
    _, _, out = _child(me + ["phases", str(tlist), "40"])
    phases = json.loads(out.strip().splitlines()[-1])
    results = work / "results" / "emulated" / "paper"
    wall, rss, _ = _child(me + ["gather", str(work / "perrun"), str(results)])
    rows["gather"] = (wall, rss)

    # paper rebuild from the cached tables: the jobs Snakemake would run after a change
    paper = work / "paper"
    paper.mkdir()
    for name in ("main.tex", "claims.yaml"):
        shutil.copy2(REPO / "paper" / name, paper / name)
    (results / "paper").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    r = str(results)
    steps = [
        ["cc", "params", "--json"],
        ["figure", "all", "--results", r],
        ["table", "table2", "--results", r, "--out", f"{r}/paper/table2.tex"],
        ["claims", "--results", r, "--claims", str(paper / "claims.yaml"), "--out-tex", f"{r}/paper/claims.tex",
         "--out-json", f"{r}/paper/claims.json", "--out-campaigns-tex", f"{r}/paper/claims-campaigns.tex"],
        # the validation campaign's section (here: "not run", as in a paper build without it)
        ["validation", "--results", f"{results.parent}/validation", "--campaign", "validation",
         "--fig-dir", f"{r}/figures", "--out-tex", f"{r}/paper/validation.tex"],
        ["macros", "--results", r, "--claims-json", f"{r}/paper/claims.json", "--out", f"{r}/paper/macros.tex"],
    ]
    rebuild_total, rebuild_peak = 0.0, 0.0
    for step in steps:
        w, m, out = _child(TCPEVAL + step, env=env, cwd=REPO)
        if step[0] == "cc":
            (Path(r) / "cc_params.json").write_text(out)
            w2, m2, _ = _child(TCPEVAL + ["table", "table1", "--cc-params", f"{r}/cc_params.json",
                                         "--out", f"{r}/paper/table1.tex"], env=env, cwd=REPO)
            w, m = w + w2, max(m, m2)
        rows[f"rebuild: {step[0]}"] = (w, m)
        rebuild_total += w
        rebuild_peak = max(rebuild_peak, m)
    w, m, _ = _child(TCPEVAL + ["paper", "build", "--results", r, "--paper-dir", str(paper)], env=env, cwd=REPO)
    rows["rebuild: latexmk"] = (w, m)
    rebuild_total += w
    rows["paper rebuild total"] = (rebuild_total, rebuild_peak)

    # per-job overhead of the workflow's per-run rule
    w, m, _ = _child(TCPEVAL + ["metrics", "run", traces[0], str(work / "one")], env=env, cwd=REPO)
    rows["1 `tcpeval metrics run` process"] = (w, m)

    n = len(traces)
    print(f"\nanalysis benchmark: {n} runs, {size / GIB:.2f} GiB of trace JSON, host cpus {os.cpu_count()}")
    print(f"{'step':40s} {'wall [s]':>10s} {'peak RSS [MiB]':>15s}")
    for k, (w, m) in rows.items():
        print(f"{k:40s} {w:10.1f} {m / 2**20 if m == m else float('nan'):15.0f}")
    print("\nper-run phases (mean per trace, ms): "
          + ", ".join(f"{k} {1000 * v:.1f}" for k, v in phases.items()))
    est = rows["1 `tcpeval metrics run` process"][0] * n / 2
    print(f"workflow estimate: {n} per-run jobs x {rows['1 `tcpeval metrics run` process'][0]:.2f} s / 2 cores "
          f"= {est:.0f} s (process start-up included)")
    metrics_wall = rows["per-run, 2 workers"][0] + rows["gather"][0]
    peak = max(v[1] for k, v in rows.items() if k in ("per-run, 1 process", "per-run, 2 workers", "gather") and v[1] == v[1])
    verdict = {
        "metrics_all_runs_s": metrics_wall, "metrics_target_s": 60, "metrics_ok": metrics_wall < 60,
        "peak_rss_bytes": peak, "peak_target_bytes": 2 * GIB, "memory_ok": peak < 2 * GIB,
        "paper_rebuild_s": rebuild_total, "rebuild_ok": rebuild_total < 60,
    }
    print(json.dumps(verdict, indent=1))
    out_dir = REPO / "results" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "analysis.json").write_text(json.dumps({
        "runs": n, "trace_bytes": size, "cpus": os.cpu_count(),
        "steps": {k: {"wall_s": w, "peak_rss_bytes": m if m == m else None} for k, (w, m) in rows.items()},
        "phases_ms_per_trace": {k: 1000 * v for k, v in phases.items()},
        "workflow_estimate_s": est, **verdict}, indent=1) + "\n")
    print(f"wrote {out_dir / 'analysis.json'}")
    shutil.rmtree(work, ignore_errors=True)
    if args.clean:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
