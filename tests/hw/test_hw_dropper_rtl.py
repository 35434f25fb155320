"""RTL of the drop module (hw/dropper) against the reference model tcpeval.drop_model.

Every test simulates the Verilog core under Icarus with random packet lengths, random
TVALID gaps and random TREADY backpressure, and compares: AXI-Lite responses and read
data, the forwarded beats (bit-exact, in order), and the set of dropped packets.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import dropper_sim as sim
import pytest

from tcpeval.drop_model import (
    CONTROL_CLEAR,
    CONTROL_ENABLE,
    CONTROL_RESEED,
    REG_CONTROL,
    REG_DROPPED_HI,
    REG_DROPPED_LO,
    REG_SEED,
    REG_SEEN_HI,
    REG_SEEN_LO,
    REG_THRESHOLD_HI,
    REG_THRESHOLD_LO,
    SEED_IF_ZERO,
    DropModule,
    threshold_for,
)

VECTORS = Path(__file__).resolve().parents[2] / "hw" / "dropper" / "vectors"
GO = CONTROL_ENABLE | CONTROL_RESEED | CONTROL_CLEAR


def program(scn: sim.Scenario, seed: int, threshold: int) -> None:
    scn.write(REG_SEED, seed)
    scn.write(REG_THRESHOLD_LO, threshold & 0xFFFFFFFF)
    scn.write(REG_THRESHOLD_HI, threshold >> 32)
    scn.write(REG_CONTROL, GO)


def simulate(bench, scn: sim.Scenario, tmp_path: Path, **kw) -> sim.Result:
    res = sim.run(scn, bench(scn.data_width), tmp_path / "run", **kw)
    assert res.errors == 0, res.stdout
    assert res.log == scn.expected_log
    assert len(res.out) == len(scn.expected_out)
    assert res.out == scn.expected_out          # bit-exact, in order
    return res


def observed_drops(res: sim.Result, scn: sim.Scenario, first: int, n: int) -> list[int]:
    got = {i - first for i in res.packet_ids(scn.data_width) if first <= i < first + n}
    return sorted(set(range(n)) - got)


def test_power_on_state(bench, tmp_path):
    scn = sim.Scenario(seed=11)
    scn.read_all()
    scn.stream(40)                  # enabled, T = 0: forwards all, counts all
    scn.read_all()
    simulate(bench, scn, tmp_path)
    assert scn.expected_log[:8] == [
        "R 00000000 0 00000001", "R 00000004 0 00000000", "R 00000008 0 00000000",
        "R 0000000c 0 00000001", "R 00000010 0 00000000", "R 00000014 0 00000000",
        "R 00000018 0 00000000", "R 0000001c 0 00000000",
    ]
    assert scn.expected_log[-4] == "R 00000010 0 00000028"     # SEEN = 40


@pytest.mark.parametrize("data_width", [256, 64])
@pytest.mark.parametrize("seed,p", [(1, 0.3), (0xDEADBEEF, 0.05), (0, 0.5), (0x80000001, 0.9)])
def test_drop_set_equals_model(bench, tmp_path, data_width, seed, p):
    n = 300
    scn = sim.Scenario(data_width=data_width, seed=seed ^ data_width, max_beats=4)
    program(scn, seed, threshold_for(p))
    scn.stream(n)
    scn.read_all()
    res = simulate(bench, scn, tmp_path)
    reference = DropModule(threshold=threshold_for(p), seed=seed).drop_indices(n)
    assert observed_drops(res, scn, 0, n) == reference
    assert scn.model.dropped == len(reference) and scn.model.seen == n


@pytest.mark.parametrize("valid_pct,ready_pct", [(100, 100), (100, 10), (15, 100), (50, 50)])
def test_handshake_timing(bench, tmp_path, valid_pct, ready_pct):
    scn = sim.Scenario(seed=valid_pct * 101 + ready_pct, max_beats=6)
    program(scn, 0x1234, threshold_for(0.2))
    scn.stream(150)
    scn.read_all()
    res = simulate(bench, scn, tmp_path, valid_pct=valid_pct, ready_pct=ready_pct)
    if valid_pct == ready_pct == 100:
        # Full rate: one beat per clock, so the run is not much longer than the input.
        assert res.cycles < len(scn.beats) + 200


def test_reseed_reproduces_and_clear_zeroes(bench, tmp_path):
    n, seed, th = 400, 0xC0FFEE, threshold_for(0.1)
    scn = sim.Scenario(seed=5)
    program(scn, seed, th)
    first = scn.stream(n)
    before = scn.read_all()
    scn.write(REG_CONTROL, CONTROL_ENABLE | CONTROL_CLEAR)        # clear only
    cleared = scn.read_all()
    cont = scn.stream(n)                                          # sequence continues
    scn.write(REG_CONTROL, CONTROL_ENABLE | CONTROL_RESEED)       # reseed only
    again = scn.stream(n)
    final = scn.read_all()
    res = simulate(bench, scn, tmp_path)

    assert first == again and first != cont
    assert observed_drops(res, scn, 0, n) == first
    assert observed_drops(res, scn, n, n) == cont
    assert observed_drops(res, scn, 2 * n, n) == again
    counters = (REG_SEEN_LO, REG_SEEN_HI, REG_DROPPED_LO, REG_DROPPED_HI)
    assert [res.read_value(before[r]) for r in counters] == [n, 0, len(first), 0]
    assert [res.read_value(cleared[r]) for r in counters] == [0, 0, 0, 0]
    # RESEED alone does not clear: the counters span both later bursts.
    assert [res.read_value(final[r]) for r in counters] == [
        2 * n, 0, len(cont) + len(again), 0]
    assert res.read_value(final[REG_CONTROL]) == CONTROL_ENABLE   # self-clearing bits
    assert scn.model.seen == 2 * n and scn.model.dropped == len(cont) + len(again)


def test_threshold_extremes(bench, tmp_path):
    scn = sim.Scenario(seed=7)
    program(scn, 99, 0)
    none = scn.stream(200)
    scn.read_all()
    program(scn, 99, 2**32)                      # HI=1, LO=0: every packet dropped
    every = scn.stream(200)
    scn.write(REG_THRESHOLD_LO, 5)               # T > 2**32 still drops everything
    scn.read(REG_THRESHOLD_LO)
    scn.read(REG_THRESHOLD_HI)
    every2 = scn.stream(50)
    scn.read_all()
    res = simulate(bench, scn, tmp_path)
    assert none == [] and every == list(range(200)) and every2 == list(range(50))
    assert observed_drops(res, scn, 0, 200) == []
    assert res.packet_ids(256) == list(range(200))
    assert scn.model.dropped == 250 and scn.model.seen == 250


def test_disable_forwards_and_freezes(bench, tmp_path):
    seed, th, n = 0xABCDEF01, threshold_for(0.4), 120
    scn = sim.Scenario(seed=13)
    program(scn, seed, th)
    a = scn.stream(n)
    scn.write(REG_CONTROL, 0)                    # disabled: forward all, count nothing
    scn.read_all()
    off = scn.stream(n)
    scn.read_all()
    scn.write(REG_CONTROL, CONTROL_ENABLE)       # resume where the generator stopped
    b = scn.stream(n)
    scn.read_all()
    res = simulate(bench, scn, tmp_path)
    assert off == []
    ref = DropModule(threshold=th, seed=seed)
    assert a + [i + n for i in b] == ref.drop_indices(2 * n)
    assert observed_drops(res, scn, n, n) == []
    assert scn.model.seen == 2 * n


def test_register_errors_and_strobes(bench, tmp_path):
    scn = sim.Scenario(seed=17)
    for ro in (REG_SEEN_LO, REG_SEEN_HI, REG_DROPPED_LO, REG_DROPPED_HI, 0x20, 0x02):
        scn.write(ro, 0xFFFFFFFF)                # read-only / unmapped: SLVERR, no effect
    scn.read(0x20)
    scn.read(0x7FC)
    scn.read(0x01)
    scn.write(REG_SEED, 0x11223344)
    scn.write(REG_SEED, 0xAA00BB00, strb=0b1010)
    scn.read(REG_SEED)
    scn.write(REG_THRESHOLD_LO, 0x01020304, strb=0b0001)
    scn.read(REG_THRESHOLD_LO)
    scn.write(REG_CONTROL, 0, strb=0b1110)       # no lane 0: CONTROL unchanged
    scn.write(REG_THRESHOLD_HI, 1, strb=0b0010)  # no lane 0: HI unchanged
    scn.read_all()
    scn.write(REG_SEED, 0)                       # 0 is replaced by SEED_IF_ZERO
    scn.write(REG_CONTROL, CONTROL_ENABLE | CONTROL_RESEED)
    scn.write(REG_THRESHOLD_LO, threshold_for(0.5))
    scn.stream(100)
    scn.read_all()
    res = simulate(bench, scn, tmp_path)
    assert sum(" 2 " in line or line.endswith(" 2") for line in res.log) == 9
    assert "R 0000000c 0 aa22bb44" in res.log
    assert DropModule(threshold=threshold_for(0.5), seed=SEED_IF_ZERO).drop_indices(100) == \
        observed_drops(res, scn, 0, 100)


def test_hardware_reset_restores_power_on(bench, tmp_path):
    scn = sim.Scenario(seed=19)
    program(scn, 0x5555, threshold_for(0.5))
    scn.stream(60)
    scn.reset()
    scn.read_all()
    after = scn.stream(60)                       # power-on: T = 0, nothing dropped
    scn.read_all()
    simulate(bench, scn, tmp_path)
    assert after == [] and scn.model.seen == 60


def test_rtl_follows_committed_vectors(bench, tmp_path):
    """Pin the RTL to the committed vector file, independently of the Python model:
    with T = 2**31 a packet is dropped iff the top bit of its draw is 0."""
    draws = [int(x, 16) for x in (VECTORS / "xorshift32_seeddeadbeef.hex").read_text().split()
             if not x.startswith("//") and len(x) == 8]
    n = 500
    scn = sim.Scenario(seed=23, max_beats=2)
    program(scn, 0xDEADBEEF, 2**31)
    scn.stream(n)
    res = simulate(bench, scn, tmp_path)
    assert observed_drops(res, scn, 0, n) == [i for i in range(n) if draws[i] < 2**31]

    case = next(c for c in json.loads((VECTORS / "drops.json").read_text())["cases"]
                if c["seed"] == 1 and c["threshold"] == threshold_for(0.5))
    scn = sim.Scenario(seed=29, max_beats=1)
    program(scn, 1, case["threshold"])
    scn.stream(case["packets"])
    res = simulate(bench, scn, tmp_path)
    assert observed_drops(res, scn, 0, case["packets"]) == case["dropped_indices"]


def binomial_interval(n: int, p: float, alpha: float) -> tuple[int, int]:
    """Central interval [lo, hi] of Binomial(n, p) holding at least 1 - alpha."""
    pmf = [math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p)) for k in range(n + 1)]
    lo, acc = 0, 0.0
    while acc + pmf[lo] <= alpha / 2:
        acc += pmf[lo]
        lo += 1
    hi, acc = n, 0.0
    while acc + pmf[hi] <= alpha / 2:
        acc += pmf[hi]
        hi -= 1
    return lo, hi


def test_drop_fraction_p001(bench, tmp_path):
    n, p, seed = 20000, 0.01, 0x600DCAFE
    scn = sim.Scenario(seed=31, max_beats=2)
    program(scn, seed, threshold_for(p))
    scn.stream(n)
    scn.read(REG_SEEN_LO)
    scn.read(REG_DROPPED_LO)
    res = simulate(bench, scn, tmp_path, valid_pct=90, ready_pct=80)
    dropped = observed_drops(res, scn, 0, n)
    assert dropped == DropModule(threshold=threshold_for(p), seed=seed).drop_indices(n)
    lo, hi = binomial_interval(n, p, 1e-3)
    assert lo <= len(dropped) <= hi, (len(dropped), lo, hi)
    assert res.log[-2:] == [f"R 00000010 0 {n:08x}", f"R 00000018 0 {len(dropped):08x}"]


def test_compare_is_strict(bench, tmp_path):
    """A draw equal to the threshold is kept (drop iff draw < T, not <=); only an exact
    tie tells the two apart, so the threshold is set to a known draw."""
    draws = [int(x, 16) for x in (VECTORS / "xorshift32_seed00000001.hex").read_text().split()
             if not x.startswith("//") and len(x) == 8]
    k = 7
    scn = sim.Scenario(seed=37, max_beats=1)
    program(scn, 1, draws[k])
    dropped = scn.stream(64)
    res = simulate(bench, scn, tmp_path)
    assert k not in dropped
    assert observed_drops(res, scn, 0, 64) == [i for i in range(64) if draws[i] < draws[k]]


def random_scenario(seed: int, bursts: int, max_packets: int, data_width: int = 256):
    """Random register traffic interleaved with packet bursts; everything checked."""
    import random
    rng = random.Random(seed)
    scn = sim.Scenario(data_width=data_width, seed=seed, max_beats=rng.choice([1, 3, 8]))
    for _ in range(bursts):
        action = rng.random()
        if action < 0.3:
            p = rng.choice([0.0, 1e-3, 0.01, 0.1, 0.5, 0.99, 1.0, rng.random()])
            program(scn, rng.getrandbits(32) if rng.random() < 0.9 else 0, threshold_for(p))
        elif action < 0.45:
            scn.write(REG_CONTROL, rng.getrandbits(3))
        elif action < 0.55:
            scn.write(rng.choice([REG_SEED, REG_THRESHOLD_LO, REG_THRESHOLD_HI]),
                      rng.getrandbits(32), strb=rng.choice([0xF, 0xF, rng.getrandbits(4)]))
        elif action < 0.6:
            scn.write(rng.choice([REG_SEEN_LO, REG_DROPPED_HI, 0x24]), rng.getrandbits(32))
        elif action < 0.63:
            scn.reset()
        scn.stream(rng.randint(1, max_packets))
        if rng.random() < 0.5:
            scn.read_all()
    scn.read_all()
    return scn


@pytest.mark.parametrize("seed", [101, 202, 303])
def test_random_register_and_traffic_mix(bench, tmp_path, seed):
    scn = random_scenario(seed, bursts=25, max_packets=80)
    simulate(bench, scn, tmp_path, valid_pct=30 + seed % 70, ready_pct=20 + seed % 80)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1000, 1012))
def test_soak_random(bench, tmp_path, seed):
    """Longer soak (about 10k packets per seed, two data widths)."""
    scn = random_scenario(seed, bursts=120, max_packets=160,
                          data_width=256 if seed % 2 else 64)
    simulate(bench, scn, tmp_path, valid_pct=10 + seed % 91, ready_pct=10 + (seed * 7) % 91)


def test_documented_host_sequence(bench, tmp_path):
    """The register writes printed by hw/dropper/host_cmds.py (the README's host
    procedure), issued to a core that already carried traffic, give exactly the model's
    sequence for (p, seed)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "host_cmds", VECTORS.parent / "host_cmds.py")
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)

    scn = sim.Scenario(seed=41)
    program(scn, 3, threshold_for(0.7))
    scn.stream(30)                               # earlier experiment, other settings
    p, seed, n = 0.02, 0xBADC0DE, 1500
    for offset, value in host.program_writes(p, seed):
        scn.write(offset, value)
    scn.stream(n)
    regs = scn.read_all()
    res = simulate(bench, scn, tmp_path)
    expected = DropModule.for_probability(p, seed=seed).drop_indices(n)
    assert observed_drops(res, scn, 30, n) == expected
    assert res.read_value(regs[REG_SEEN_LO]) == n
    assert res.read_value(regs[REG_DROPPED_LO]) == len(expected)
