"""Two queues at the bottleneck (ecn_queues: 2, tevdelay.c drr_next): a marking queue for
the flows whose algorithm asks for ECN and a drop-tail one for the rest, a deficit round
robin of one full frame per turn sharing the rate while both have frames waiting. The
schedule is pinned through `tevdelay drrtest`, which runs the engine's own scheduler on
frames given as QUEUE:ARRIVAL_NS:BYTES; a real run shows why a data centre separates them:
DCTCP beside a flow without ECN in one queue is starved by it, in two it gets its share."""
from __future__ import annotations

import subprocess

import pytest

RATE = 1e9
FULL = 1514
NS_FULL = FULL * 8 / RATE * 1e9  # 12,112 ns per full frame at 1 Gbit/s


def schedule(art, *frames: str) -> list[tuple[int, float]]:
    out = subprocess.run([str(art.tevdelay), "drrtest", f"{RATE:g}", *frames],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    return [(int(q), float(t)) for q, t in (line.split() for line in out if line)]


def test_two_backlogged_queues_of_full_frames_take_turns_at_the_links_rate(art):
    frames = [f"{q}:0:{FULL}" for q in (0, 1) for _ in range(4)]
    out = schedule(art, *frames)
    assert [q for q, _ in out] == [1, 0, 1, 0, 1, 0, 1, 0]
    assert [t for _, t in out] == pytest.approx([NS_FULL * (i + 1) for i in range(8)])


def test_the_share_is_in_bytes_small_frames_get_a_full_frames_worth_per_turn(art):
    # queue 1: 100-byte frames; queue 0: full frames; both waiting from the start
    frames = [f"0:0:{FULL}"] * 3 + ["1:0:100"] * 30
    order = [q for q, _ in schedule(art, *frames)]
    # queue 1's turns carry 15 frames (1,500 of its 1,514 bytes), queue 0's one frame
    assert order[:16] == [1] * 15 + [0]
    assert order[16:32] == [1] * 15 + [0]


def test_a_queue_alone_has_the_whole_link_and_an_idle_link_starts_at_the_arrival(art):
    out = schedule(art, f"0:0:{FULL}", f"0:0:{FULL}", f"1:100000:{FULL}", f"0:100000:{FULL}")
    # back to back while queue 0 is alone; then idle until 100 us, where both arrive
    assert out[0] == (0, pytest.approx(NS_FULL)) and out[1] == (0, pytest.approx(2 * NS_FULL))
    assert sorted(q for q, _ in out[2:]) == [0, 1]
    assert [t for _, t in out[2:]] == pytest.approx([100000 + NS_FULL, 100000 + 2 * NS_FULL])


def test_a_frame_that_arrives_while_the_other_queue_sends_waits_for_that_frame_only(art):
    # the link is busy with queue 0's frame when queue 1's arrives: it goes next, before
    # queue 0's second frame, which had been waiting since 0
    out = schedule(art, f"0:0:{FULL}", f"0:0:{FULL}", f"1:5000:{FULL}")
    assert out == [(0, pytest.approx(NS_FULL)), (1, pytest.approx(2 * NS_FULL)), (0, pytest.approx(3 * NS_FULL))]


@pytest.mark.parametrize("frames", [["2:0:100"], ["0:500:100", "0:100:100"], ["0:0:0"], ["x"]],
                         ids=["no-third-queue", "out-of-order", "empty-frame", "not-a-frame"])
def test_a_schedule_it_cannot_take_is_refused(art, frames):
    run = subprocess.run([str(art.tevdelay), "drrtest", "1e9", *frames], capture_output=True, text=True)
    assert run.returncode == 2


@pytest.mark.root
def test_the_engine_refuses_a_second_queue_without_marking(art):
    run = subprocess.run([str(art.tevdelay), "line", "--delay-ns", "1000", "--in", "lo",
                          "--route", "10.0.0.1=lo,00:00:00:00:00:01,00:00:00:00:00:02",
                          "--rate-bps", "1e9", "--buffer-bytes", "100000", "--data-in", "lo",
                          "--data-route", "10.0.0.2=lo,00:00:00:00:00:01,00:00:00:00:00:02,1",
                          "--ecn-queues", "2"], capture_output=True, text=True, timeout=20)
    assert run.returncode == 2 and "--ecn-queues is 1 or 2, and 2 needs --ecn-threshold-bytes" in run.stderr


# The share runs' path, the same on every host (0.1 Gbit/s is the floor of the tests' rates):
# 125 kB, so that K (a sixth of it) holds 14 full frames. Written at 0.5 Gbit/s and 2 ms,
# which a slow host cannot carry (CI at 0.1 Gbit/s and 2 ms: K under three frames, DCTCP's own
# queue marked on 99 % of its frames; docs/fidelity.md); at 10 ms DCTCP's starving window
# also trims five times less often, so the stack takes its window later in a run (below).
SHARE_RATE_BPS = 1e8
SHARE_RTT_MS = 10.0


def _share_run(backend, tmp_path, queues: int | None) -> dict:
    from dataclasses import replace

    from emulated_helpers import nothing_left, run_id_of

    from tcpeval import trace
    from tcpeval.spec import adhoc_condition

    cond = adhoc_condition(["dctcp", "cubic"], SHARE_RTT_MS, 0.0, 8.0, impl="port", rate_bps=SHARE_RATE_BPS,
                           buffer_bytes=250_000, seed=11, dilation=1)
    # CUBIC without ECN: with one queue the flow says so (its endpoints accept ECN but do not
    # ask), as beside a DCTCP in a switch that does not separate them; with two, it is the default
    cubic = replace(cond.flows[1], impl="native", ecn=False if queues != 2 else None)
    bdp = SHARE_RATE_BPS / 8 * SHARE_RTT_MS / 1e3
    cond = replace(cond, flows=(cond.flows[0], cubic), ecn_threshold_bytes=int(bdp / 6), ecn_queues=queues)
    backend.run(cond, tmp_path)
    assert nothing_left(run_id_of(tmp_path))
    return trace.read_trace(tmp_path)


def _dctcp_share(record: dict) -> float:
    rates = [f["summary"]["mean_throughput_bps"] for f in record["flows"]]
    return rates[0] / sum(rates)


# In one queue a single skipped hook of DCTCP's port can hand its window to the stack for the
# rest of the run: a window of garbage (1,100,784,878 segments in one sample), then the stack's
# own, hundreds of segments in flight where DCTCP allows 2 (docs/fidelity.md, "One skip costs a
# starving DCTCP the rest of its run"). The verdict flags such a run (cc), and its share from
# then on is not DCTCP's. So the one-queue share is DCTCP's over the samples before its window
# first went above the largest its port allowed, judged once they span a second or more (up to
# SHARED_RUNS runs). Twelve runs on the AMD VM (six each at 0.5 Gbit/s, 2 ms and 0.1, 10): 8
# flagged so (90-111 % of DCTCP's data sent above its window; whole-run shares up to 0.34,
# as CI's failing 0.35), in 6 of them its window went above the port's largest (after 0.1-7.4
# s, at 10 ms not before 3.6 s), and before that DCTCP carried 0.8-6.7 % of the throughput.
SHARED_RUNS = 3
MIN_SAMPLES_IN_CONTROL = 10
# The one queue's marks. CUBIC's frames, tens of thousands, found it at K or above on
# 99.7-99.8 % of their arrivals (six runs on an Intel VM, 2026-12-06). A starving DCTCP sends
# a few hundred frames, and those of its slow start before the queue first reached K go
# unmarked: 19-120 of 531-710 there (83-96 % marked), 163 of 749 on CI (78 %, which failed
# the 80 % this test asked before); in its own queue 11-12 %.
ONE_QUEUE_OVER_K = 0.95
ONE_QUEUE_MARKED = 0.5


def _dctcp_share_in_control(record: dict) -> tuple[float, int]:
    """(DCTCP's share of the two flows' throughput, samples) over the samples before DCTCP's
    window first went above the largest its port allowed (the guard's max_allowed_cwnd, in
    bytes as the verdict's window check takes it: record_parts.judged_window_bytes)."""
    from tcpeval.condition import MSS_BYTES

    cap = record["measured"]["cc_guard"]["dctcp_tev"]["max_allowed_cwnd"] * MSS_BYTES
    dctcp, cubic = (f["samples"] for f in record["flows"])
    n = next((i for i, w in enumerate(dctcp["cwnd_bytes"]) if w is not None and w > cap), len(dctcp["t_s"]))
    own, other = sum(dctcp["throughput_bps"][:n]), sum(cubic["throughput_bps"][:n])
    return own / (own + other), n


@pytest.mark.root
def test_dctcp_beside_a_flow_without_ecn_gets_its_share_only_in_a_queue_of_its_own(backend_once, tmp_path):
    # one attempt each in the backend: the shares and marks are judged, not the verdict (a
    # run the stack took over is flagged for it)
    for attempt in range(1, SHARED_RUNS + 1):
        shared = _share_run(backend_once, tmp_path / f"one-{attempt}", None)
        in_control, samples = _dctcp_share_in_control(shared)
        if samples >= MIN_SAMPLES_IN_CONTROL:
            break
    split = _share_run(backend_once, tmp_path / "two", 2)
    for record in (shared, split):
        dctcp, cubic = record["flows"]
        assert dctcp["cc"]["ecn"]["negotiated"] is True and cubic["cc"]["ecn"]["negotiated"] is False
    assert shared["flows"][1]["variant"] == "cubic" and shared["condition"]["flows"][1]["ecn"] is False
    assert shared["environment"]["sysctls"]["endpoints"]["s2"]["net.ipv4.tcp_ecn"] in (2, "2")
    # one queue: CUBIC keeps it above K (judged on CUBIC's own frames, tens of thousands)
    link = shared["measured"]["delay_line"]["link"]
    assert "queues" not in link
    ecn = shared["measured"]["ecn"]
    cubic_frames = link["admitted"] - ecn["ect_frames"] - ecn["ce_on_arrival"]
    assert ecn["not_ect_over_threshold"] > ONE_QUEUE_OVER_K * cubic_frames, (ecn, cubic_frames)
    # two: each flow in its own, the marking one only DCTCP's
    queues = split["measured"]["delay_line"]["link"]["queues"]
    assert queues["scheduler"] == "drr" and queues["marking"]["sent"] > 0 and queues["drop_tail"]["sent"] > 0
    assert [f["cc"]["ecn"]["queue"] for f in split["flows"]] == ["marking", "drop_tail"]
    assert split["mechanisms"]["rate_detail"]["ecn_queues"] == 2
    # DCTCP holds its own queue near K: marked on a fraction of its frames, not on nearly all
    assert split["measured"]["ecn"]["ce_marked"] < 0.5 * split["measured"]["ecn"]["ect_frames"]
    # ... and DCTCP's frames are marked on most of them, all but those of its slow start
    # before the queue first reached K
    assert ecn["ce_marked"] > ONE_QUEUE_MARKED * ecn["ect_frames"], ecn
    assert split["condition"]["ecn_queues"] == 2 and "ecn_queues" not in shared["condition"]
    # the shares: starved in one queue while DCTCP keeps its window, about half in two
    assert samples >= MIN_SAMPLES_IN_CONTROL, f"the stack took DCTCP's window within {samples} samples in each run"
    assert in_control < 0.3 < 0.4 < _dctcp_share(split), (in_control, samples, shared["fidelity"]["reasons"])
