"""A sender whose congestion window is corrupted does not pass unnoticed: a real run with a
congestion control that, like the 3.16 ports before their guard, jumps to a window of
~1e9 segments after its first reduction, is flagged for its window (root only)."""
from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tcpeval import trace
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

HERE = Path(__file__).resolve().parent
KERNEL_NAME = "tevbadwindow"   # .name in usercc.bpf.c built with -DCORRUPT_WINDOW
MAP_NAME = "badwindow"         # the struct_ops map's name there


@pytest.fixture
def corrupting_cc(art, tmp_path):
    """usercc.bpf.c -DCORRUPT_WINDOW built against the running kernel's BTF and registered (bpftool);
    unregistered afterwards whatever the test did."""
    from tcpeval import cc
    vmlinux_dir = cc.build()                      # build/cc: vmlinux.h of this kernel
    obj = tmp_path / "badwindow.bpf.o"
    subprocess.run(["clang", "-g", "-O2", "-target", "bpf", "-D__TARGET_ARCH_x86",
                    f"-I{vmlinux_dir}", "-DCORRUPT_WINDOW", "-Wall", "-c", str(HERE / "usercc.bpf.c"),
                    "-o", str(obj)], check=True)
    subprocess.run(["bpftool", "struct_ops", "register", str(obj)], check=True,
                   capture_output=True)
    try:
        assert KERNEL_NAME in cc.available_algorithms()
        yield KERNEL_NAME
    finally:
        subprocess.run(["bpftool", "struct_ops", "unregister", "name", MAP_NAME],
                       check=False, capture_output=True)
    assert KERNEL_NAME not in cc.available_algorithms()


def test_a_corrupted_window_is_flagged_with_its_size(corrupting_cc, rate, tmp_path):
    from tcpeval.backends import get_backend
    # one attempt: a window flag is retried as host trouble, and every retry would be
    # flagged the same way
    backend = get_backend("emulated", progress=False, lock_timeout_s=900, attempts=1)
    cond = adhoc_condition(["reno"], 6.2, 1e-3, 4.0, impl="native", rate_bps=rate, seed=1)
    cond = replace(cond, flows=tuple(replace(f, variant=corrupting_cc) for f in cond.flows))
    backend.run(cond, tmp_path)
    rec = trace.read_trace(tmp_path)
    assert rec["flows"][0]["cc"]["verified"] == corrupting_cc
    max_cwnd = max(f["summary"]["max_cwnd_bytes"] for f in rec["flows"])
    assert max_cwnd > 1e11, max_cwnd      # 2^30 segments of ~1.4 kB
    assert rec["fidelity"]["verdict"] == "flagged"
    window = [r for r in rec["fidelity"]["reasons"] if r.startswith("window:")]
    assert window and "MB exceeds" in window[0], rec["fidelity"]["reasons"]
