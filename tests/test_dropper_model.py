"""The drop module's reference semantics (shared by RTL, BPF and the tests)."""
import math

import pytest

from tcpeval import drop_model


def test_xorshift32_known_sequence_from_seed_one():
    # Marsaglia's xorshift32 (13, 17, 5) from state 1.
    state, out = 1, []
    for _ in range(3):
        state = drop_model.xorshift32(state)
        out.append(state)
    assert out == [270369, 67634689, 2647435461]


@pytest.mark.parametrize("p, threshold", [(0, 0), (1, 2**32), (0.5, 2**31), (1e-7, 429)])
def test_threshold_register_is_round_p_times_two_to_the_32(p, threshold):
    assert drop_model.threshold_for(p) == threshold


@pytest.mark.parametrize("p", [-0.01, 1.01, math.nan, math.inf])
def test_threshold_rejects_probabilities_outside_unit_interval(p):
    with pytest.raises(ValueError, match="drop probability"):
        drop_model.threshold_for(p)


def test_zero_threshold_drops_nothing_and_full_threshold_drops_everything():
    never = drop_model.DropModule(threshold=0, seed=7)
    always = drop_model.DropModule(threshold=2**32, seed=7)
    assert never.drop_indices(10_000) == []
    assert always.drop_indices(10_000) == list(range(10_000))


def test_drop_fraction_matches_probability_within_binomial_bounds():
    p, n = 0.01, 200_000
    module = drop_model.DropModule.for_probability(p, seed=12345)
    dropped = len(module.drop_indices(n))
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(dropped - n * p) < 4 * sigma
    assert (module.seen, module.dropped) == (n, dropped)


def test_reseed_through_the_control_register_replays_the_sequence():
    module = drop_model.DropModule.for_probability(0.1, seed=99)
    first = module.drop_indices(1000)
    module.write(drop_model.REG_CONTROL, drop_model.CONTROL_ENABLE | drop_model.CONTROL_RESEED | drop_model.CONTROL_CLEAR)
    assert (module.seen, module.dropped) == (0, 0)
    assert module.drop_indices(1000) == first


def test_registers_read_back_split_64_bit_counters():
    module = drop_model.DropModule(threshold=2**32, seed=3)
    module.seen = module.dropped = 2**33 + 5
    assert module.read(drop_model.REG_SEEN_HI) == 2 and module.read(drop_model.REG_SEEN_LO) == 5
    assert module.read(drop_model.REG_THRESHOLD_HI) == 1 and module.read(drop_model.REG_THRESHOLD_LO) == 0


def test_disabled_module_forwards_and_counts_nothing():
    module = drop_model.DropModule(threshold=2**32, seed=3)
    module.write(drop_model.REG_CONTROL, 0)
    assert module.drop_indices(100) == [] and module.seen == 0


def test_zero_seed_is_replaced_because_xorshift_would_stick_at_zero():
    assert drop_model.DropModule(threshold=2**31, seed=0).state == drop_model.SEED_IF_ZERO
