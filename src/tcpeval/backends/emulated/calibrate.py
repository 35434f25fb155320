"""Host capacity of the emulated path, cached per host and kernel.

`tcpeval calibrate` (or the first run that needs it) pushes unshaped native-CUBIC flows
through the complete per-packet path -- the run's own topology, CPU placement, offloads,
the BPF dropper enabled at p = 0, the delay line -- for one flow at the shortest and the
longest RTT of the paper (0.2 and 24.2 ms) and for two flows (the shared-bottleneck
criteria) at 24.2 ms. The host capacity is the lowest steady-state throughput (second half
of each run) of these points; the default bottleneck rate is 90 % of it, rounded down to
0.1 Gbps, so that the emulated link, not the host's CPUs, limits a run. Calibration runs
under the host lock (no experiment of ours disturbs it); the host's load average before
and after is recorded, since other tenants' load lowers the figure. The result is cached
in /var/cache/tcpeval (root) or ~/.cache/tcpeval, keyed by hostname, kernel, CPU count
and the content hash of the backend (its C/BPF sources and Python modules), so a new
kernel or a changed backend is calibrated anew; it is recorded in each trace.
"""
from __future__ import annotations

import json
import math
import os
import platform
import socket
import tempfile
import time
from pathlib import Path

CALIBRATION_POINTS = ((1, 0.2), (1, 24.2), (2, 24.2))  # (flows, RTT ms)
DEFAULT_FRACTION = 0.9
VERSION = 2
HERE = Path(__file__).resolve().parent


def backend_hash() -> str:
    """Content hash of the backend's Python modules (placement, topology, offloads...):
    they shape the per-packet path as much as the C sources do."""
    import hashlib
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def cache_dir() -> Path:
    if os.environ.get("TCPEVAL_CACHE"):
        return Path(os.environ["TCPEVAL_CACHE"])
    return Path("/var/cache/tcpeval") if os.geteuid() == 0 else Path.home() / ".cache" / "tcpeval"


def host_key(build_hashes: dict) -> dict:
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "kernel_version": platform.version(), "cpus": os.cpu_count(),
            "build": {k: v[:16] for k, v in sorted(build_hashes.items())},
            "backend_py": backend_hash()[:16], "version": VERSION}


def cache_path(key: dict) -> Path:
    return cache_dir() / f"emulated-capacity-{key['hostname']}-{key['kernel']}.json"


def load(build_hashes: dict) -> dict | None:
    key = host_key(build_hashes)
    try:
        data = json.loads(cache_path(key).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if data.get("key") == key else None


def default_rate(capacity_bps: float) -> float:
    return math.floor(capacity_bps * DEFAULT_FRACTION / 1e8) * 1e8


def calibrate(executor, build_hashes: dict, *, duration_s: float = 4.0, log=None) -> dict:
    """Measure and cache. ``executor(rtt_ms, duration_s, run_dir, flows)`` performs one
    unshaped run (the caller holds the host lock) and returns its record."""
    log = log or (lambda m: None)
    key = host_key(build_hashes)
    points = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tcpeval-calibrate-") as tmp:
        for flows, rtt in CALIBRATION_POINTS:
            log(f"calibration: {flows} unshaped flow(s) at {rtt} ms RTT for {duration_s:g} s ...")
            record = executor(rtt, duration_s, Path(tmp) / f"f{flows}-rtt{rtt}", flows)
            m = record["measured"]
            # steady state (second half): slow start at 24 ms would understate the host
            bps = m["steady_throughput_bps"]
            points.append({"flows": flows, "rtt_ms": rtt, "throughput_bps": bps,
                           "mean_throughput_bps": sum(f["summary"]["mean_throughput_bps"]
                                                      for f in record["flows"]),
                           "measured_rtt_ms": m["rtt_ms"], "cpu_busy": m.get("cpu_busy"),
                           "fidelity_reasons": record["fidelity"]["reasons"]})
            log(f"calibration: {flows} flow(s), {rtt} ms -> {bps / 1e9:.2f} Gbps")
    capacity = min(p["throughput_bps"] for p in points)
    data = {"key": key, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host_capacity_bps": capacity, "default_rate_bps": default_rate(capacity),
            "points": points, "loadavg_before": load_before, "loadavg_after": os.getloadavg()[0],
            "method": " ".join(__doc__.split("\n\n")[1].split())}
    path = cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_suffix(".tmp")
    tmp_path.write_text(json.dumps(data, indent=1))
    os.replace(tmp_path, path)
    data["cache_file"] = str(path)
    return data
