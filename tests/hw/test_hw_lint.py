"""The drop-module RTL compiles warning-free as Verilog-2001 at several widths
(Icarus -Wall), and passes Verilator's lint when Verilator is installed."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RTL = Path(__file__).resolve().parents[2] / "hw" / "dropper" / "rtl" / "tcpeval_dropper.v"
PARAMS = [
    {},
    {"C_S_AXIS_DATA_WIDTH": 64, "C_M_AXIS_DATA_WIDTH": 64},
    {"C_S_AXIS_DATA_WIDTH": 512, "C_M_AXIS_DATA_WIDTH": 512},
    {"C_DECODE_BITS": 5},
]


@pytest.mark.skipif(shutil.which("iverilog") is None,
                    reason="Icarus Verilog not installed: apt-get install iverilog")
@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(map(str, p.values())) or "default")
def test_iverilog_wall_clean(tmp_path, params):
    args = [f"-Ptcpeval_dropper.{k}={v}" for k, v in params.items()]
    proc = subprocess.run(["iverilog", "-g2001", "-Wall", "-s", "tcpeval_dropper", *args,
                           "-o", str(tmp_path / "a.vvp"), str(RTL)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout + proc.stderr == "", proc.stderr


@pytest.mark.skipif(shutil.which("verilator") is None,
                    reason="Verilator not installed: apt-get install verilator")
@pytest.mark.parametrize("params", PARAMS, ids=lambda p: ",".join(map(str, p.values())) or "default")
def test_verilator_lint_clean(params):
    args = [f"-G{k}={v}" for k, v in params.items()]
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module",
                           "tcpeval_dropper", *args, str(RTL)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "%Warning" not in proc.stderr, proc.stderr
