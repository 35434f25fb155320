"""The link engine's data ring (tevdelay.c, link_admit): the kernel fills its slots in turn
and cannot pass one the link still holds, so when it comes round to a held slot the ring is
full and it drops. The link must not take that slot for an arrival: taken, the frame went
into the queue again and the engine's cursor ran ahead of the kernel's, every later frame
sat unread behind it, and the flow stalled for good (BIC's slow-start overshoot at 24.2 ms,
9.85 Gbps x6, 2026-12-02). `tevdelay ringtest` plays the kernel's part on a ring in memory."""
from __future__ import annotations

import subprocess


def ring(art, slots: int, steps: str) -> dict:
    """k: the kernel fills its next slot (or drops); a: the link admits; s: it sends one."""
    out = subprocess.run([str(art.tevdelay), "ringtest", str(slots), steps],
                         capture_output=True, text=True, check=True).stdout.split()
    return {out[i]: int(out[i + 1]) for i in range(0, len(out), 2)}


def test_a_held_slot_is_not_taken_again_when_the_kernel_comes_round_to_it(art):
    # four frames fill the ring and stay queued; the fifth finds the first slot held
    full = ring(art, 4, "kkkka" + "ka")
    assert full == {"admitted": 4, "drops": 1, "cur": 0, "head": 0, "queued": 4}


def test_the_cursor_stays_with_the_kernel_once_the_held_frame_is_sent(art):
    # the first frame leaves, its slot takes the next arrival, and the link reads it there
    got = ring(art, 4, "kkkka" + "ka" + "s" + "ka")
    assert got == {"admitted": 5, "drops": 1, "cur": 1, "head": 1, "queued": 4}
    # two more leave and their slots take two arrivals; one more leaves, and of the next two
    # arrivals the first takes its slot and the second finds the ring full again
    later = ring(art, 4, "kkkka" + "ka" + "s" + "ka" + "sskka" + "skka")
    assert later == {"admitted": 8, "drops": 2, "cur": 0, "head": 0, "queued": 4}


def test_arrivals_are_admitted_in_order_while_the_ring_has_room(art):
    got = ring(art, 8, "kkakkkas" + "kka")
    assert got == {"admitted": 7, "drops": 0, "cur": 7, "head": 7, "queued": 6}


def test_a_slot_count_that_is_not_a_whole_positive_number_is_refused_with_usage(art):
    for slots in ("0", "12abc", "-3", ""):
        out = subprocess.run([str(art.tevdelay), "ringtest", slots, "k"],
                             capture_output=True, text=True)
        assert out.returncode == 2, slots
        assert "usage: tevdelay ringtest SLOTS" in out.stderr, slots
