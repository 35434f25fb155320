"""The window check judges a 3.16 port by the largest window its guard let stand, and every
other flow by its largest sample: a port's sample may catch the garbage window a skipped
hook left for a moment, whose effect the guard check judges (sent_over)."""
from __future__ import annotations

from types import SimpleNamespace

from tcpeval.backends.emulated.ccadapter import guard_difference
from tcpeval.backends.emulated.record_parts import judged_window_bytes
from tcpeval.condition import MSS_BYTES

GARBAGE_WINDOW_BYTES = 108_266_549 * MSS_BYTES  # a skipped hook's window, as sampled


def _run(handles, sampled, guard):
    parsed = [{"summary": {"max_cwnd_bytes": b}} for b in sampled]
    return SimpleNamespace(handles=handles, parsed=parsed, traffic=SimpleNamespace(cc_guard=guard))


def _port(name):
    return SimpleNamespace(impl="port", kernel_name=name)


def test_a_ports_garbage_sample_gives_way_to_the_window_its_guard_let_stand():
    run = _run([_port("reno316"), _port("reno316")], [GARBAGE_WINDOW_BYTES, 900_000],
               {"reno316": {"max_allowed_cwnd": 700, "sent_over": 12}})
    assert judged_window_bytes(run) == 700 * MSS_BYTES


def test_a_native_flows_sample_is_judged_as_sampled_beside_a_port():
    native = SimpleNamespace(impl="native", kernel_name="cubic")
    run = _run([_port("reno316"), native], [GARBAGE_WINDOW_BYTES, 3_000_000],
               {"reno316": {"max_allowed_cwnd": 700}})
    assert judged_window_bytes(run) == 3_000_000


def test_a_port_whose_guard_has_no_maximum_is_judged_by_its_sample():
    # an object built before the guard kept the maximum, or no counters read at all
    run = _run([_port("bic316"), None], [GARBAGE_WINDOW_BYTES, 0], {"bic316": {"sent_over": 3}})
    assert judged_window_bytes(run) == GARBAGE_WINDOW_BYTES
    assert judged_window_bytes(_run([_port("bic316")], [5e6], None)) == 5e6


def test_a_runs_guard_counts_are_differences_and_its_maximum_stands_as_read():
    before = {"reductions": 40, "sent_over": 3, "max_allowed_cwnd": 10}
    after = {"reductions": 95, "sent_over": 3, "max_allowed_cwnd": 812}
    assert guard_difference(after, before) == {"reductions": 55, "sent_over": 0, "max_allowed_cwnd": 812}
    assert guard_difference(after, None) is None
