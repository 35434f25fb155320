"""Fixtures for the drop-module RTL tests: Icarus availability and compiled benches."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

TB_DIR = Path(__file__).resolve().parents[2] / "hw" / "dropper" / "tb"
sys.path.insert(0, str(TB_DIR))

import dropper_sim  # noqa: E402


@pytest.fixture(scope="session")
def bench(tmp_path_factory):
    """Compile the bench once per TDATA width; returns width -> vvp image."""
    if not dropper_sim.have_icarus():
        pytest.skip("Icarus Verilog (iverilog, vvp) not installed: apt-get install iverilog")
    build = tmp_path_factory.mktemp("hw_build")
    cache: dict[int, Path] = {}

    def get(width: int = 256) -> Path:
        if width not in cache:
            cache[width] = dropper_sim.compile_tb(build, width)
        return cache[width]

    return get
