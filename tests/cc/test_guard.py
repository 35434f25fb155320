"""The host-fault guard (cc/include/cc316.h): a port repairs what the stack did behind its
back -- a window reduction whose ssthresh() never ran, a threshold or window no stack
value can be -- as it would have computed it, counts it, and changes nothing otherwise.

Driven through the host build, with the stack's side written by hand the way the 6.x
stack does it when the hook's BPF program is skipped (as seen on the project's VM: the
trampoline then returns an uninitialised slot, 0x81104110 there)."""
from __future__ import annotations

import pytest
from hostsim import LOSS, OPEN, RECOVERY, Sim

import tcpeval.cc as cc

RTT = 100_000  # us
GARBAGE = 0x81104110  # what the skipped ssthresh() handed the stack on the VM


def _warm(sim: Sim, rtts: int = 30) -> None:
    for _ in range(rtts):
        sim.rtt(RTT, pkts_per_ack=2)


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def _stack_reduction(sim: Sim, state: int, hook: bool) -> int:
    """tcp_enter_recovery/tcp_init_cwnd_reduction as 6.x does it, with or without the
    ssthresh() hook running, then one PRR step (prr_delivered 3, prr_out 0) from the
    threshold -- the ~1e9 window when the hook was skipped. No set_state() either way."""
    s = sim.sk
    prior = s.snd_cwnd
    s.prior_ssthresh = max(s.snd_ssthresh, (prior >> 1) + (prior >> 2))
    s.prior_cwnd = prior
    s.snd_ssthresh = sim.ops.ssthresh(sim.p) if hook else GARBAGE
    s.snd_cwnd_cnt = 0
    s.icsk_ca_state = state
    s.snd_cwnd = (s.snd_ssthresh * 3 + prior - 1) // prior
    return prior


def _stack_reduction_without_hook(sim: Sim, state: int) -> int:
    return _stack_reduction(sim, state, hook=False)


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_reduction_without_the_ports_ssthresh_is_repaired_as_the_port_computes_it(host_build, variant):
    faulty, sound = Sim(host_build, variant, cwnd=200, ssthresh=100), Sim(host_build, variant, cwnd=200, ssthresh=100)
    for sim in (faulty, sound):
        _warm(sim)
    assert faulty.cwnd == sound.cwnd
    before = faulty.guard_stats()
    prior = _stack_reduction_without_hook(faulty, RECOVERY)
    assert faulty.cwnd > 1000 * prior               # what the stack made of the bogus threshold
    faulty.ack(1)                                   # the next hook the stack calls: pkts_acked
    got = _delta(faulty.guard_stats(), before)
    assert got["missed_reductions"] == 1 and got["foreign_ssthresh"] == 1, got
    assert got["reductions"] == 0                   # the port's own ssthresh() did not run
    _stack_reduction(sound, RECOVERY, hook=True)    # the same reduction with the hook
    sound.ack(1)
    want = sound.ssthresh
    assert faulty.ssthresh == want, (faulty.ssthresh, want)
    assert faulty.cwnd <= prior                     # PRR's ceiling while recovery lasts
    # what the port keeps for later (BIC/CUBIC's Wmax, H-TCP's beta...) is what the
    # hook would have left: growth and the next reduction are the same
    for sim in (faulty, sound):
        sim.sk.icsk_ca_state = OPEN
        sim.sk.snd_cwnd = want
        _warm(sim, 5)
    assert faulty.cwnd == sound.cwnd
    assert faulty.loss()[1] == sound.loss()[1]


@pytest.mark.parametrize("variant", ["reno", "bic"])
def test_repair_after_the_reduction_ended_sets_the_window_it_would_have_ended_with(host_build, variant):
    sim, sound = Sim(host_build, variant, cwnd=200, ssthresh=100), Sim(host_build, variant, cwnd=200, ssthresh=100)
    for s in (sim, sound):
        _warm(s)
    _stack_reduction_without_hook(sim, RECOVERY)
    sim.sk.icsk_ca_state = OPEN                     # recovery ended while no hook ran
    sim.ack(1)
    _stack_reduction(sound, RECOVERY, hook=True)
    want = sound.ssthresh
    assert sim.ssthresh == want and sim.cwnd <= want + 1  # + this ACK's slow-start step


def test_loss_state_keeps_the_stacks_window_and_gets_the_threshold(host_build):
    sim = Sim(host_build, "reno", cwnd=200, ssthresh=100)
    _warm(sim)
    prior = _stack_reduction_without_hook(sim, LOSS)
    sim.sk.snd_cwnd = 1                             # tcp_enter_loss: in flight + 1
    sim.ops.set_state(sim.p, OPEN)                  # any later hook repairs
    assert sim.ssthresh == max(prior >> 1, 2) and sim.cwnd == 1


def test_a_window_no_stack_value_can_be_is_replaced_by_the_window_before_the_reduction(host_build):
    sim = Sim(host_build, "scalable", cwnd=300, ssthresh=100)
    _warm(sim)
    prior, ss = sim.loss()
    before = sim.guard_stats()
    sim.sk.snd_cwnd = GARBAGE                       # a skipped undo_cwnd()
    sim.ack(1)
    got = _delta(sim.guard_stats(), before)
    assert got["foreign_cwnd"] == 1 and got["missed_reductions"] == 0
    assert sim.cwnd == prior


def test_what_a_foreign_window_let_the_stack_send_is_counted_once(host_build):
    sim = Sim(host_build, "reno", cwnd=300, ssthresh=100)
    _warm(sim)
    seen = sim.cwnd
    before = sim.guard_stats()
    sim.sk.snd_cwnd = GARBAGE                       # a skipped hook's window ...
    sim.sk.snd_nxt += 3 * seen                      # ... let the stack send three windows more
    sim.sk.segs_out += 3 * seen
    sim.ack(1)
    over = sim.sk.packets_out - (2 * seen + 2)      # above one slow-start step over `seen`
    assert over > 0 and _delta(sim.guard_stats(), before)["sent_over"] == over
    for _ in range(20):                             # the same data still in flight: once only
        sim.ack(1)
    assert _delta(sim.guard_stats(), before)["sent_over"] == over


PLAUSIBLE_GARBAGE = 0x0673F735  # 108,266,549 segments: a bic316 run's window on the VM


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_a_window_no_hook_of_the_port_allowed_is_replaced_by_the_one_it_last_saw(host_build, variant):
    # below 2^31, so a stack can hold it; but no ACK more than doubles a window, and the
    # port's undo did not return it: a skipped hook put it there
    sim = Sim(host_build, variant, cwnd=300, ssthresh=100)
    _warm(sim)
    seen = sim.cwnd
    before = sim.guard_stats()
    sim.sk.snd_cwnd = PLAUSIBLE_GARBAGE             # a skipped undo_cwnd()
    sim.ack(1)
    got = _delta(sim.guard_stats(), before)
    assert got["foreign_cwnd"] == 1 and got["missed_reductions"] == 0, got
    assert seen <= sim.cwnd <= seen + 2, (seen, sim.cwnd)


def test_the_largest_window_a_port_let_stand_leaves_out_the_one_it_replaced(host_build):
    # the verdict's window check judges a port by this maximum, not by a sample that may
    # catch a skipped hook's window before the guard's next check replaces it
    sim = Sim(host_build, "reno", cwnd=300, ssthresh=100)
    sim.reset_guard_maxima()
    _warm(sim)
    seen = sim.cwnd
    assert seen - 2 <= sim.guard_stats()["max_allowed_cwnd"] <= seen
    sim.sk.snd_cwnd = PLAUSIBLE_GARBAGE             # a skipped undo_cwnd()
    sim.ack(1)
    assert seen <= sim.guard_stats()["max_allowed_cwnd"] <= seen + 2


def _at_own_window_then_garbage(host_build, variant):
    """A warmed port at a window it allowed (`seen`), its twin, and the port's window
    replaced by a skipped hook's garbage that no hook of it has seen yet."""
    sims = [Sim(host_build, variant, cwnd=300, ssthresh=100) for _ in range(2)]
    for sim in sims:
        _warm(sim)
    seen = sims[0].cwnd
    for sim in sims:
        sim.allow_window(seen)
    sims[0].sk.snd_cwnd = PLAUSIBLE_GARBAGE         # a skipped undo_cwnd(), not yet replaced
    return sims[0], sims[1], seen


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_a_reduction_that_starts_at_a_skipped_hooks_window_is_made_from_the_ports_own(host_build, variant):
    # the stack calls ssthresh() with prior_cwnd = snd_cwnd = the garbage: the threshold
    # is the one the port computes from the window it allowed, never one of ~10^8
    sim, twin, seen = _at_own_window_then_garbage(host_build, variant)
    sim.reset_guard_maxima()
    _stack_reduction(sim, RECOVERY, hook=True)
    _stack_reduction(twin, RECOVERY, hook=True)
    assert sim.sk.snd_ssthresh == twin.sk.snd_ssthresh <= seen
    for _ in range(5):
        sim.ack(1)
    assert sim.guard_stats()["max_allowed_cwnd"] <= 2 * seen + 2


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_a_skipped_reduction_from_a_skipped_hooks_window_is_repaired_from_the_ports_own(host_build, variant):
    # two skips in a row: the reduction began at the garbage (prior_cwnd) and its
    # ssthresh() did not run either; the repair must not take its threshold from prior_cwnd
    sim, twin, seen = _at_own_window_then_garbage(host_build, variant)
    sim.reset_guard_maxima()
    _stack_reduction_without_hook(sim, RECOVERY)
    sim.ack(1)
    _stack_reduction(twin, RECOVERY, hook=True)
    assert sim.sk.snd_ssthresh == twin.sk.snd_ssthresh <= seen
    assert sim.cwnd <= seen
    for _ in range(5):
        sim.ack(1)
    assert sim.guard_stats()["max_allowed_cwnd"] <= 2 * seen + 2


PLAUSIBLE_THRESHOLD = 0x7FFFFF00  # below 2^31 - 1: a stack can hold it


def _reduction_at_the_same_window(sim: Sim, slot: int | None) -> int:
    """A reduction that begins at the window the one before began at, so tp->prior_cwnd
    does not move; with `slot`, its ssthresh() skipped (the stack takes the slot). The
    stack then ends it (window = threshold) and an ACK follows; returns the window."""
    _warm(sim)
    s = sim.sk
    window = s.prior_cwnd = s.snd_cwnd              # an earlier reduction began at this window
    sim.ack(1)                                      # the guard takes note of it
    s.prior_cwnd = s.snd_cwnd = window              # tcp_init_cwnd_reduction at the same window
    s.snd_ssthresh = sim.ops.ssthresh(sim.p) if slot is None else slot
    sim.ops.set_state(sim.p, RECOVERY)              # tcp_set_ca_state, then the state
    s.icsk_ca_state = RECOVERY
    s.snd_cwnd = s.snd_ssthresh                     # tcp_end_cwnd_reduction: window = threshold
    sim.ops.set_state(sim.p, OPEN)
    s.icsk_ca_state = OPEN
    sim.ack(1)
    return window


@pytest.mark.parametrize("slot", [PLAUSIBLE_THRESHOLD, 0, 1])
@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_a_skipped_reduction_at_the_same_window_cannot_pass_its_threshold_off_as_the_ports(host_build, variant, slot):
    # Two reductions at the same window leave tp->prior_cwnd where it was, so the second,
    # whose ssthresh() the host skipped, is not seen as a reduction; only its threshold
    # shows it. A large one the stack can hold: when the reduction ends the stack sets the
    # window to it, which passed the bound before (highspeed316 at 0.2 ms / 1e-4, 9.5 Gbps
    # virtual, reached a window of 2.9 TB). A threshold of 0 (the slot on 2026-11-28):
    # PRR drains the window to nothing and DCTCP crawled back from one segment, once a
    # second. No threshold a port computes is above all its windows or below 2.
    sim = Sim(host_build, variant, cwnd=300, ssthresh=100)
    sound = Sim(host_build, variant, cwnd=300, ssthresh=100)
    before = sim.guard_stats()
    window = _reduction_at_the_same_window(sim, slot)
    got = _delta(sim.guard_stats(), before)
    assert got["foreign_ssthresh"] == 1, got
    _reduction_at_the_same_window(sound, None)
    assert (sim.ssthresh, sim.cwnd) == (sound.ssthresh, sound.cwnd) and sim.cwnd <= window


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_a_window_drained_while_no_hook_ran_gets_the_threshold_and_its_stall_is_timed(host_build, variant):
    # All of a CWR's ACKs came in while the host skipped the port's hooks: PRR drained the
    # window towards the skipped ssthresh()'s 0 and the CWR ended there. With nothing in
    # flight no ACK calls a hook until the probe timer sends (here 230 ms later).
    sim, sound = (Sim(host_build, variant, cwnd=300, ssthresh=100) for _ in range(2))
    for x in (sim, sound):
        _warm(x)
        window = x.sk.prior_cwnd = x.sk.snd_cwnd    # an earlier reduction began at this window
        x.ack(1)
    before = sim.guard_stats()
    s = sim.sk
    s.prior_cwnd = window                           # the same window: prior_cwnd does not move
    s.snd_ssthresh = 0                              # the skipped ssthresh()'s slot, no set_state()
    s.snd_cwnd = 0                                  # drained, and the CWR over: window = threshold
    sim.ack(1, dt_us=230_000)                       # the probe's ACK: the port's first hook since
    got = _delta(sim.guard_stats(), before)
    assert got["foreign_ssthresh"] == 1 and got["drained"] == 1, got
    assert 229 <= got["drained_ms"] <= 231, got
    sound.sk.prior_cwnd = sound.sk.snd_cwnd = window
    want = sound.ops.ssthresh(sound.p)              # the threshold the skipped hook would have set
    assert sim.ssthresh == want and want <= sim.cwnd <= want + 2, (sim.ssthresh, sim.cwnd, want)


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_an_undo_to_the_window_before_a_timeout_is_left_alone(host_build, variant):
    # a timeout left cwnd 1; a spurious-timeout undo restores what the port returns,
    # far above twice the window the port last saw -- and legitimate
    sim = Sim(host_build, variant, cwnd=300, ssthresh=100)
    _warm(sim)
    sim.loss()
    _warm(sim, 3)
    sim.sk.snd_cwnd = 1                             # tcp_enter_loss
    sim.ack(1)
    before = sim.guard_stats()
    restored = sim.undo()                           # the stack sets what undo_cwnd() returns
    assert restored > 4
    sim.sk.snd_cwnd = restored
    sim.ack(1)
    assert _delta(sim.guard_stats(), before)["foreign_cwnd"] == 0
    assert sim.cwnd >= restored


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_slow_start_after_a_timeout_to_one_past_the_threshold_is_left_alone(host_build, variant):
    # after a timeout (window 1) the ACK for the retransmitted hole acknowledges all the
    # receiver held out of order; 3.16 slow start then stops at ssthresh + 1 -- far above
    # twice the window the port last saw, one above the threshold, and legitimate
    sim = Sim(host_build, variant, cwnd=300, ssthresh=100)
    _warm(sim)
    _, ssthresh = sim.timeout()
    before = sim.guard_stats()
    sim.ack(3 * ssthresh)
    grown = sim.cwnd
    assert grown > 2 * 1 + 2 and grown > ssthresh, (grown, ssthresh)  # the case the bound must allow
    sim.ack(1)                                      # the next hook looks at that window
    assert _delta(sim.guard_stats(), before)["foreign_cwnd"] == 0
    assert sim.cwnd >= grown


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_guard_changes_nothing_on_a_sound_host(host_build, variant):
    sim = Sim(host_build, variant, cwnd=50, ssthresh=40)
    before = sim.guard_stats()
    losses = 0
    for i in range(40):
        _warm(sim, 3)
        if i % 4 == 3:
            sim.loss()
            losses += 1
    got = _delta(sim.guard_stats(), before)
    acked = got.pop("acked_seen")
    assert acked > 0 and got.pop("acked_delivered") == acked
    got.pop("max_allowed_cwnd")  # a maximum, not a count
    assert got == {"reductions": losses, "missed_reductions": 0, "missed_states": 0,
                   "foreign_ssthresh": 0, "foreign_cwnd": 0, "sent_over": 0,
                   "drained": 0, "drained_ms": 0}


def test_acks_whose_hooks_did_not_run_show_as_delivered_but_not_seen(host_build):
    # the stack processed ACKs for 30 segments with no hook of the port running; the next
    # ACK that runs pkts_acked() finds them in tp->delivered
    sim = Sim(host_build, "reno", cwnd=100, ssthresh=50)
    _warm(sim, 1)
    before = sim.guard_stats()
    for _ in range(10):
        sim.ack(2)
    sim.sk.delivered += 30                        # 15 ACKs of 2 the host ran without the port
    for _ in range(10):
        sim.ack(2)
    got = _delta(sim.guard_stats(), before)
    assert (got["acked_seen"], got["acked_delivered"]) == (40, 70)


def test_state_change_without_set_state_is_counted(host_build):
    sim = Sim(host_build, "cubic", cwnd=100, ssthresh=50)
    before = sim.guard_stats()
    sim.sk.icsk_ca_state = LOSS                     # the stack entered Loss; no hook ran
    sim.ack(1)
    assert _delta(sim.guard_stats(), before)["missed_states"] == 1


def test_parse_bss_dump_reads_the_counters():
    dump = ('[{"key": ["0x00"], "value": ["0x00"], "formatted": {"value": {".bss": '
            '[{"cc316_guard_stats": {"reductions": 7, "missed_reductions": 1, '
            '"missed_states": 2, "foreign_ssthresh": 1, "foreign_cwnd": 0, "acked_seen": 900, '
            '"acked_delivered": 910, "sent_over": 3, "max_allowed_cwnd": 412}}]}}}]')
    assert cc.parse_bss_dump(dump) == {"reductions": 7, "missed_reductions": 1, "missed_states": 2,
                                       "foreign_ssthresh": 1, "foreign_cwnd": 0, "acked_seen": 900,
                                       "acked_delivered": 910, "sent_over": 3, "max_allowed_cwnd": 412}
    with pytest.raises(cc.CCError, match="no cc316_guard_stats"):
        cc.parse_bss_dump('[{"formatted": {"value": {".bss": [{"other": 1}]}}}]')
