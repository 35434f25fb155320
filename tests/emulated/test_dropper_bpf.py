"""The BPF drop module decides exactly like the reference model (BPF_PROG_TEST_RUN)."""
from __future__ import annotations

import pytest

from tcpeval.drop_model import DropModule, threshold_for

pytestmark = pytest.mark.root

CASES = [
    # (seed, threshold, packets)
    (1, threshold_for(0.1), 5000),
    (0xDEADBEEF, threshold_for(1e-3), 20000),
    (0, threshold_for(0.5), 3000),           # seed 0 -> SEED_IF_ZERO
    (12345, 0, 2000),                          # p = 0: never
    (7, 2**32, 2000),                          # p = 1: 33-bit threshold drops every packet
    (7, 2**32 - 1, 2000),                      # largest 32-bit threshold
    (2**32 - 1, threshold_for(0.01), 10000),
]


@pytest.mark.parametrize("seed,threshold,packets", CASES)
def test_bpf_decisions_equal_model(art, seed, threshold, packets):
    from tcpeval.backends.emulated.dropctl import test_run

    out = test_run(art, seed, threshold, packets)
    model = DropModule(threshold=threshold, seed=seed)
    expected = model.drop_indices(packets)
    assert out["drops"] == expected
    regs = out["regs"]
    assert regs["seen"] == model.seen == packets
    assert regs["dropped"] == model.dropped == len(expected)
    assert regs["state"] == model.state  # generator state after N steps matches too
    assert regs["threshold_lo"] == threshold & 0xFFFFFFFF and regs["threshold_hi"] == threshold >> 32
