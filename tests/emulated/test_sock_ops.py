"""A sock_ops program on the senders (condition.sock_ops): it sees the run's sender sockets,
its effect shows in the flow, the trace records its hash, and an object that does not load
is refused naming the field, with nothing left behind."""
from __future__ import annotations

import hashlib
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from emulated_helpers import nothing_left, run_id_of

from tcpeval import cc, trace
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import sockops
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "sockops" / "by-distance.bpf.c"


def _build(tmp_path: Path, link_mbps: int) -> Path:
    obj = tmp_path / f"by-distance-{link_mbps}.bpf.o"
    subprocess.run(["clang", "-O2", "-g", "-target", "bpf", f"-I{cc.build()}", f"-DLINK_MBPS={link_mbps}",
                    "-c", str(EXAMPLE), "-o", str(obj)], check=True)
    return obj


def _leftovers(run_dir: Path) -> list[Path]:
    run_id = run_id_of(run_dir)
    return [p for p in (sockops.cgroup2_root() / f"tcpeval-{run_id}-senders",
                        sockops.PIN_DIR / f"tev{run_id}_sockops") if p.exists()]


def test_the_example_program_sizes_the_senders_buffers_to_the_handshake_rtt(backend, tmp_path, rate):
    # sized for a 20 Mbit/s link at the path's 10 ms: buffers of about 50 kB hold the flow
    # far below the bottleneck's rate
    obj = _build(tmp_path, 20)
    cond = replace(adhoc_condition(["reno"], 10.0, 0.0, 4.0, impl="native", rate_bps=rate, seed=3, dilation=1),
                   sock_ops=str(obj))
    run_dir = tmp_path / "run"
    backend.run(cond, run_dir)
    record = trace.read_trace(run_dir)
    got = record["mechanisms"]["sock_ops"]
    assert got["sha256"] == hashlib.sha256(obj.read_bytes()).hexdigest() and got["program_id"] > 0
    assert record["condition"]["sock_ops"] == str(obj)
    flow = record["flows"][0]["summary"]
    assert flow["mean_throughput_bps"] < 0.5 * rate
    assert flow["max_cwnd_bytes"] < 200_000  # the send buffer caps what is in flight
    # a link the program keeps idle is not the host falling behind: no attempt is flagged for it
    judged = [record["fidelity"], *record["fidelity"]["earlier_attempts"]]
    assert not [f for v in judged for f in v["findings"] if f["check"] == "link busy"]
    assert not _leftovers(run_dir) and nothing_left(run_id_of(run_dir))


def test_an_object_that_is_no_sock_ops_program_is_refused_naming_the_field(backend, tmp_path, rate):
    junk = tmp_path / "not-bpf.o"
    junk.write_bytes(b"\x7fELF not really")
    cond = replace(adhoc_condition(["reno"], 10.0, 0.0, 2.0, impl="native", rate_bps=rate, seed=3, dilation=1),
                   sock_ops=str(junk))
    run_dir = tmp_path / "run"
    with pytest.raises(BackendError, match=r"sock_ops: .*not-bpf.o does not load as a sock_ops program"):
        backend.run(cond, run_dir)
    assert not (run_dir / "trace.json").exists()
    assert not _leftovers(run_dir)
