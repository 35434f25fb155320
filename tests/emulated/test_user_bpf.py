"""impl bpf: a user's own struct_ops object runs a flow, registered for the run only."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from emulated_helpers import nothing_left, run_id_of

from tcpeval import cc, trace
from tcpeval.backends import algorithms
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

HERE = Path(__file__).resolve().parent
NAME = "tevuserreno"  # .name in usercc.bpf.c


@pytest.fixture
def user_object(art, tmp_path):
    vmlinux_dir = cc.build()
    obj = tmp_path / "usercc.bpf.o"
    subprocess.run(["clang", "-g", "-O2", "-target", "bpf", "-D__TARGET_ARCH_x86", f"-I{vmlinux_dir}",
                    "-Wall", "-c", str(HERE / "usercc.bpf.c"), "-o", str(obj)], check=True)
    return obj


def test_a_users_bpf_object_carries_a_flow_and_is_gone_afterwards(backend, user_object, tmp_path, rate):
    cond = adhoc_condition([NAME], 6.2, 0.0, 3.0, impl="bpf", object_path=str(user_object), rate_bps=rate,
                           dilation=1, seed=2)
    assert algorithms.problems([cond], "emulated") == []
    run_dir = tmp_path / "run"
    backend.run(cond, run_dir)
    flow = trace.read_trace(run_dir)["flows"][0]
    assert flow["impl"] == "bpf" and flow["cc"]["verified"] == NAME
    assert flow["cc"]["object_sha256"] == hashlib.sha256(user_object.read_bytes()).hexdigest()
    assert flow["summary"]["mean_throughput_bps"] > 0.3 * rate
    assert NAME not in cc.available_algorithms()
    assert nothing_left(run_id_of(run_dir))


def test_an_object_under_another_name_than_the_design_says_is_refused(backend, user_object, tmp_path, rate):
    from tcpeval.backends.base import BackendError
    cond = adhoc_condition(["notthename"], 6.2, 0.0, 2.0, impl="bpf", object_path=str(user_object),
                           rate_bps=rate, dilation=1, seed=2)
    with pytest.raises(BackendError, match="not as 'notthename'"):
        backend.run(cond, tmp_path / "run")
    assert NAME not in cc.available_algorithms()
