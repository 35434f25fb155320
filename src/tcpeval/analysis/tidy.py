"""Tidy tables (Parquet), built incrementally.

Per run (one Snakemake job per trace, `tcpeval metrics run TRACE OUT_DIR`):
    OUT_DIR/run.parquet      one row: identity, provenance, fidelity, every per-run metric
    OUT_DIR/flows.parquet    one row per flow
    OUT_DIR/samples.parquet  one row per flow and interval

Gather (`tcpeval metrics gather OUT RUN_OUT_DIR...`) concatenates the small per-run files
into OUT/{runs,flows,samples}.parquet without opening any trace, so a new run costs one
trace read plus a concatenation. Samples are streamed batch by batch (bounded memory).

Schemas are fixed here so per-run files always concatenate, whatever values are null.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tcpeval import paths
from tcpeval.analysis import extract
from tcpeval.analysis import metrics as M
from tcpeval.analysis.extract import BadTrace
from tcpeval.errors import SpecError

RUN_FILE, FLOWS_FILE, SAMPLES_FILE = "run.parquet", "flows.parquet", "samples.parquet"
RUNS_TABLE, FLOWS_TABLE, SAMPLES_TABLE = "runs.parquet", "flows.parquet", "samples.parquet"
BAD_LIST = "skipped_runs.json"

_S, _F, _I, _B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
RUN_SCHEMA = pa.schema([
    ("run", _S), ("trace", _S), ("status", _S), ("error", _S),
    ("backend", _S), ("campaign", _S), ("criterion", _S), ("variants", _S), ("variant", _S),
    ("second", _S), ("rtt_ms", _F), ("drop", _F), ("rep", _I), ("duration_s", _F),
    ("interval_s", _F), ("background_loss", _F), ("n_flows", _I), ("verdict", _S), ("flag_reasons", _S),
    ("flag_checks", _S),
    ("link_rate_bps", _F), ("payload_ceiling_bps", _F), ("measured_rtt_ms", _F), ("measured_drop", _F),
    ("dropped_packets", _I), ("background_dropped", _I),
    ("hostname", _S), ("kernel", _S), ("git_revision", _S), ("tcpeval_version", _S),
    ("mech_drop", _S), ("mech_delay", _S), ("mech_rate", _S), ("dilation", _I), ("started_at", _S),
    ("wall_s", _F), ("attempts", _I), ("link_late_share", _F),
    ("mean_bps", _F), ("mean_hw_bps", _F), ("q25_bps", _F), ("q50_bps", _F), ("q75_bps", _F), ("mean_frac", _F),
    ("q25_hw_bps", _F), ("q50_hw_bps", _F), ("q75_hw_bps", _F), ("steady_from", _S),
    ("metrics_from_s", _F), ("precision_reached", _B), ("stopped_early", _B), ("ran_s", _F),
    ("flow1_bps", _F), ("flow2_bps", _F), ("jain", _F), ("utilisation_bps", _F),
    ("jain_hw", _F), ("utilisation_hw_bps", _F), ("share_first_hw", _F),
    ("utilisation_frac", _F), ("conv_applicable", _B), ("converged", _B),
    ("conv_time_s", _F), ("spread_bps", _F), ("spread_hw_bps", _F), ("ubar_bps", _F), ("lambda", _F), ("epsilon", _F),
    # beyond the paper (extract._other_studies)
    ("design", _S), ("factors", _S), ("rate_setting_bps", _F), ("buffer_setting_bytes", _F),
    ("flows_label", _S), ("n_tcp", _I), ("tcp_total_bps", _F), ("jain_overlap", _F), ("overlap_s", _F),
    ("disturbance_start_s", _F), ("disturbance_stop_s", _F), ("pre_bps", _F), ("during_bps", _F),
    ("post_bps", _F), ("recovery_ratio", _F), ("recovered", _B), ("recovery_time_s", _F),
    ("ecn_threshold_bytes", _F), ("ecn_ce_marked", _F), ("ecn_marked_share", _F),
])
FLOW_SCHEMA = pa.schema([
    ("run", _S), ("flow", _I), ("order", _I), ("variant", _S), ("impl", _S), ("start_s", _F),
    ("end_s", _F), ("bytes", _F), ("mean_bps", _F), ("mean_common_bps", _F),
    ("retransmits", _F), ("cc_requested", _S), ("cc_verified", _S),
    ("protocol", _S), ("stop_s", _F), ("retrans_rate", _F), ("min_bps", _F), ("max_bps", _F),
    # RPC flows (extract._rpc_columns); null for others
    ("rpc_request_bytes", _F), ("rpc_response_bytes", _F), ("rpc_rate_setting", _F), ("rpc_issued", _F),
    ("rpc_completed", _F), ("rpc_per_s", _F), ("rpc_lat_min_us", _F), ("rpc_lat_mean_us", _F),
    ("rpc_lat_max_us", _F), ("rpc_lat_p50_us", _F), ("rpc_lat_p90_us", _F), ("rpc_lat_p99_us", _F),
    ("rpc_lat_p999_us", _F), ("rpc_lat_cdf_us", pa.list_(pa.float64())),
    # where the link marks (flows[].cc.ecn); null elsewhere
    ("ecn_negotiated", _B), ("ecn_response", _S), ("ecn_queue", _S),
])
_F32 = pa.float32()
SAMPLE_SCHEMA = pa.schema([
    ("run", pa.dictionary(pa.int32(), pa.string())), ("flow", pa.int16()),
    ("t_s", pa.float64()), ("abs_t_s", pa.float64()), ("bytes", pa.float64()),
    ("throughput_bps", _F32), ("u_bps", _F32), ("cwnd_bytes", _F32), ("rtt_us", _F32),
    ("retransmits", _F32),
])


def _row_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    cols = {f.name: [_clean(r.get(f.name)) for r in rows] for f in schema}
    return pa.Table.from_pydict(cols, schema=schema)


def _clean(v):
    return None if isinstance(v, float) and math.isnan(v) else v


def _sample_table(s: dict) -> pa.Table:
    n = len(s["t_s"])
    run = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([s["run"]]))
    arrays = [run] + [pa.array(np.asarray(s[f.name]).astype(f.type.to_pandas_dtype()), type=f.type,
                               from_pandas=True)
                      for f in SAMPLE_SCHEMA if f.name != "run"]
    return pa.Table.from_arrays(arrays, schema=SAMPLE_SCHEMA)


def _write_atomic(table: pa.Table, target: Path, compression: str = "snappy") -> None:
    # Per-run files: snappy (about 10x faster to read back than zstd, which the gather
    # does 3 x 1,280 times); the gathered tables: zstd (smaller, read a few times).
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression=compression)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run_tables(trace_path: str | Path, *, lam: float = M.DEFAULT_LAMBDA, eps: float = M.DEFAULT_EPSILON,
               skip_bad: bool = False) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The three per-run tables of one trace. A bad trace raises BadTrace naming the run,
    or with ``skip_bad`` yields a single run row with status 'bad' and the error."""
    try:
        record = extract.load(trace_path)
        row, flows, samples = extract.summarise(record, str(trace_path), lam, eps)
    except extract.BadTrace as err:
        if not skip_bad:
            raise
        row = {"run": _run_from_path(trace_path), "trace": str(trace_path), "status": "bad",
               "error": str(err)}
        return (_row_table([row], RUN_SCHEMA), FLOW_SCHEMA.empty_table(), SAMPLE_SCHEMA.empty_table())
    return _row_table([row], RUN_SCHEMA), _row_table(flows, FLOW_SCHEMA), _sample_table(samples)


def _run_from_path(trace_path) -> str:
    # Best effort identity of a bad run: the path grammar, else the path itself.
    p = Path(trace_path)
    text = str(p.parent if p.name == extract.trace_mod.TRACE_FILE else p)
    parts = text.split("/")
    for i in range(len(parts)):
        try:
            return paths.run_dir_from_parts(paths.parse("/".join(parts[i:]), raw_dir="."), raw_dir=".")
        except SpecError:
            continue
    return text


def write_run(trace_path: str | Path, out_dir: str | Path, **kw) -> dict:
    """`tcpeval metrics run`: the per-run Parquet files of one trace; returns the run row."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run, flows, samples = run_tables(trace_path, **kw)
    _write_atomic(flows, out / FLOWS_FILE)
    _write_atomic(samples, out / SAMPLES_FILE)
    _write_atomic(run, out / RUN_FILE)  # last: its presence marks a complete per-run output
    return run.to_pylist()[0]


def run_table_current(path: str | Path) -> bool:
    """Whether a per-run table has every column this version writes: one written before a
    column was added is recomputed (`metrics build`), so the column is not read as null."""
    return set(RUN_SCHEMA.names) <= set(pq.read_schema(path).names)


def gather(run_dirs: Iterable[str | Path], out_dir: str | Path, *, skip_bad: bool = False) -> dict:
    """Concatenate per-run outputs into the campaign tables. Bad runs (status 'bad', made
    with --skip-bad) stop the gather unless ``skip_bad``; then they are listed in
    OUT/skipped_runs.json and kept as rows with status 'bad' (figures count them)."""

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_dirs = [Path(d) for d in run_dirs]
    missing = [str(d) for d in run_dirs if not (d / RUN_FILE).exists()]
    if missing:
        raise BadTrace("per-run metrics missing for: " + ", ".join(missing[:10])
                       + (f" ... and {len(missing) - 10} more" if len(missing) > 10 else ""))
    runs = [pq.read_table(d / RUN_FILE, schema=RUN_SCHEMA) for d in run_dirs]
    runs_t = pa.concat_tables(runs) if runs else RUN_SCHEMA.empty_table()
    status = runs_t.column("status").to_pylist()
    bad = [{"run": r, "trace": t, "error": e} for r, t, e, s in
           zip(runs_t.column("run").to_pylist(), runs_t.column("trace").to_pylist(),
               runs_t.column("error").to_pylist(), status) if s != "ok"]
    if bad and not skip_bad:
        raise BadTrace("bad traces (rerun, or use --skip-bad):\n  "
                       + "\n  ".join(f"{b['run']}: {b['error']}" for b in bad))
    dup = _duplicates(runs_t.column("run").to_pylist())
    if dup:
        raise BadTrace(f"runs gathered twice: {', '.join(dup[:5])}")
    _write_atomic(runs_t, out / RUNS_TABLE, "zstd")
    flows = [pq.read_table(d / FLOWS_FILE, schema=FLOW_SCHEMA) for d in run_dirs]
    _write_atomic(pa.concat_tables(flows) if flows else FLOW_SCHEMA.empty_table(), out / FLOWS_TABLE, "zstd")
    _gather_samples(run_dirs, out / SAMPLES_TABLE)
    (out / BAD_LIST).write_text(json.dumps(bad, indent=1) + "\n")
    return {"runs": runs_t.num_rows, "bad": bad}


def _duplicates(items: list) -> list:
    seen, dup = set(), []
    for i in items:
        if i in seen:
            dup.append(i)
        seen.add(i)
    return dup


def _gather_samples(run_dirs: list[Path], target: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp, SAMPLE_SCHEMA, compression="zstd") as writer:
            for d in run_dirs:
                table = pq.read_table(d / SAMPLES_FILE)
                if table.num_rows:
                    writer.write_table(table.cast(SAMPLE_SCHEMA))
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_runs(results: str | Path):
    """The runs table as a pandas DataFrame (analysis/report side)."""
    import pandas as pd

    path = Path(results) / RUNS_TABLE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no runs table; run `tcpeval metrics gather` first")
    return pd.read_parquet(path)


def read_flows(results: str | Path):
    import pandas as pd

    return pd.read_parquet(Path(results) / FLOWS_TABLE)


def sample_column_by_run(results: str | Path, column: str = "throughput_bps"):
    """(run names, run code per sample, values) of one samples column, via Arrow: a few
    bytes per sample instead of a pandas frame (paper scale: ~14 M samples)."""
    table = pq.read_table(Path(results) / SAMPLES_TABLE, columns=["run", column])
    if table.num_rows == 0:
        return [], np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    table = table.unify_dictionaries().combine_chunks()
    runs = table.column("run").chunk(0)
    return (runs.dictionary.to_pylist(), runs.indices.to_numpy(zero_copy_only=False),
            table.column(column).chunk(0).to_numpy(zero_copy_only=False))


def read_samples(results: str | Path, runs: list[str] | None = None, columns: list[str] | None = None):
    """Samples, optionally only of some runs (pushed down as a filter: the table is big)."""
    import pandas as pd

    filters = [("run", "in", list(runs))] if runs is not None else None
    if runs is not None and not runs:
        return pd.DataFrame({c: [] for c in (columns or [f.name for f in SAMPLE_SCHEMA])})
    return pd.read_parquet(Path(results) / SAMPLES_TABLE, columns=columns, filters=filters)
