"""Host capacity of the emulated path, cached per host and kernel.

`tcpeval calibrate` (or the first run that needs it) pushes one unshaped native-CUBIC
flow through the complete per-packet path -- offloads off, the BPF dropper attached and
enabled at p = 0, the delay line -- at the shortest and the longest RTT of the paper
(0.2 and 24.2 ms). The host capacity is the lower of the two throughputs; the default
bottleneck rate is 90 % of it, rounded down to 0.1 Gbps, so that the emulated link, not
the host's CPUs, limits a run. The result is cached in /var/cache/tcpeval (root) or
~/.cache/tcpeval, keyed by hostname, kernel release and build, and recorded in each
trace.
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

CALIBRATION_RTTS_MS = (0.2, 24.2)
DEFAULT_FRACTION = 0.9
VERSION = 1


def cache_dir() -> Path:
    if os.environ.get("TCPEVAL_CACHE"):
        return Path(os.environ["TCPEVAL_CACHE"])
    return Path("/var/cache/tcpeval") if os.geteuid() == 0 else Path.home() / ".cache" / "tcpeval"


def host_key(build_hashes: dict) -> dict:
    return {"hostname": socket.gethostname(), "kernel": platform.release(),
            "kernel_version": platform.version(), "cpus": os.cpu_count(),
            "build": {k: v[:16] for k, v in sorted(build_hashes.items())}, "version": VERSION}


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
    """Measure and cache. ``executor(rtt_ms, duration_s, run_dir)`` performs one unshaped
    run (the caller holds the host lock) and returns its record."""
    log = log or (lambda m: None)
    key = host_key(build_hashes)
    points = []
    with tempfile.TemporaryDirectory(prefix="tcpeval-calibrate-") as tmp:
        for rtt in CALIBRATION_RTTS_MS:
            log(f"calibration: unshaped flow at {rtt} ms RTT for {duration_s:g} s ...")
            record = executor(rtt, duration_s, Path(tmp) / f"rtt{rtt}")
            bps = sum(f["summary"]["mean_throughput_bps"] for f in record["flows"])
            points.append({"rtt_ms": rtt, "throughput_bps": bps,
                           "measured_rtt_ms": record["measured"]["rtt_ms"],
                           "cpu_busy": record["measured"].get("cpu_busy")})
            log(f"calibration: {rtt} ms -> {bps / 1e9:.2f} Gbps")
    capacity = min(p["throughput_bps"] for p in points)
    data = {"key": key, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "host_capacity_bps": capacity, "default_rate_bps": default_rate(capacity),
            "points": points, "method": __doc__.strip().splitlines()[2].strip()}
    path = cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_path = path.with_suffix(".tmp")
    tmp_path.write_text(json.dumps(data, indent=1))
    os.replace(tmp_path, path)
    data["cache_file"] = str(path)
    return data
