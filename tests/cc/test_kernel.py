"""Real-kernel behaviour of the BPF ports between namespaces (root only).

Flows cross a dumbbell (sender -> router with a 100 Mbit/s tbf -> receiver); losses
are induced on purpose with an nft numgen rule at the receiver. The sender samples
TCP_INFO (ca_state, cwnd, ssthresh, ...) every ~0.3 ms; loss events themselves are
recorded in the kernel at the moment they happen (conftest.LossProbe).
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

import tcpeval.cc as cc

pytestmark = pytest.mark.root

# sample columns from flowtool.info
T, STATE, CWND, SSTHRESH, RETRANS, SEGS_IN, DELIVERED = range(7)
# 3.16's first HS-TCP bands (upper cwnd bound, md << 8): 38/128, 118/112, 221/104, 347/98.
# The receive-window cap (rcvbuf 100000) keeps the flow small, but cwnd can still pass
# 118 (6.x counts a flow cwnd-limited below 2 x max_packets_out): 130-131 was seen in
# 1 flow of 15, with the ports of 92e0173 and of 5712c3d alike, i.e. band 2.
HSTCP_MD = {0: 128, 1: 112, 2: 104, 3: 98}
INF = 0x7FFFFFFF
SETS_SSTHRESH_OUTSIDE_EVENTS = ("cubic", "vegas", "westwood", "yeah")


LOSS_STATES = (2, 3, 4)  # CWR, Recovery, Loss


def loss_events(events):
    """(cwnd the ssthresh hook saw, ssthresh it set, in slow start, event) per loss
    event, from the kernel's own record of the state change (LossProbe): leaving
    Open/Disorder for CWR/Recovery/Loss. prior_cwnd is the cwnd at the ssthresh
    call; for Recovery/Loss prior_ssthresh = max(old ssthresh, 3/4 cwnd), so it is
    >= cwnd exactly when the old ssthresh was (slow start, 3.16: cwnd <= ssthresh).
    CWR clears prior_ssthresh: the ssthresh of the previous state change applies."""
    out, last_ssthresh = [], INF
    for e in events:
        if e["old"] in (0, 1) and e["new"] in LOSS_STATES:
            c = e["prior_cwnd"]
            old = e["prior_ssthresh"] if e["new"] != 2 else last_ssthresh
            out.append((c, e["ssthresh"], c <= old, e))
        last_ssthresh = e["ssthresh"]
    return out


def expected_ssthresh(variant, c, slow_start, e):
    if variant == "reno":
        return max(c >> 1, 2)
    if variant == "scalable":
        return max(c - (c >> 3), 2)
    if variant == "highspeed":
        # the band is the one cong_avoid last chose (struct hstcp316.ai). 3.16 moves
        # it only in congestion avoidance while cwnd-limited, so it lags cwnd: with
        # this receive-window cap it can stay 0 at cwnd 88 (0 before any avoidance).
        band = e["p0"]
        assert band in HSTCP_MD, e
        if slow_start and e["prior_ssthresh"] == INF:
            assert band == 0, e
        return max(c - ((c * HSTCP_MD[band]) >> 8), 2)
    if variant == "htcp":
        beta = e["p1"] & 0xFF  # struct htcp316.beta, as this ssthresh call set it
        assert 64 <= beta <= 102, e
        return max((c * beta) >> 7, 2)
    if variant == "bic":
        return max(c >> 1, 2) if c <= 14 else max(c * 819 // 1024, 2)
    if variant == "cubic":
        return max(c * 717 // 1024, 2)
    # The other 3.16 modules. Where the decrease depends on the port's state, the port keeps
    # the state it decides by in the first words of its private area (the probe's p0..p3).
    if variant in ("vegas", "hybla", "lp"):
        return max(c >> 1, 2)                 # tcp_reno_ssthresh
    if variant == "veno":
        # struct veno316.diff (backlog << 1) as the last ACK left it: 4/5 below beta << 1
        return max(c * 4 // 5, 2) if e["p0"] < 6 else max(c >> 1, 2)
    if variant == "illinois":
        beta = e["p0"]  # struct illinois316.beta (1/64) the call used
        assert 8 <= beta <= 32, e
        return max(c - ((c * beta) >> 6), 2)
    if variant == "yeah":
        # struct yeah316 (lastQ, doing_reno_now): remove the queue, within [cwnd/8, cwnd/2],
        # unless slow mode lasted 16 RTTs (halve); at least 2 (see yeah316_ssthresh_for)
        q, slow_rtts = e["p0"], e["p1"]
        red = max(min(q, max(c >> 1, 2)), c >> 3) if slow_rtts < 16 else max(c >> 1, 2)
        return c - red if c > red + 2 else 2
    if variant == "westwood":
        # Reno's halving on entering recovery; an RTO's CA_EVENT_LOSS (before the state
        # change) sets BWE x RTTmin / mss from struct westwood316 (bw_est, rtt_min); mss
        # 1460 here (MTU 1500, no timestamps), 1448 with timestamps
        if e["new"] != 4:
            return max(c >> 1, 2)
        got = {max((e["p0"] * e["p1"] & 0xFFFFFFFF) // mss, 2) for mss in (1460, 1448)}
        return e["ssthresh"] if e["ssthresh"] in got else min(got)
    raise AssertionError(variant)


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_port_loads_and_carries_a_flow(dumbbell, variant):
    seen = {}

    def check_ss(db):
        seen["flows"] = cc.verify_flows(h, netns=db.S, port=db.port)

    with cc.loaded(variant) as h:
        assert h.kernel_name == f"{variant}316" and h.hz == 250 and h.impl == "port"
        assert h.kernel_name in cc.available_algorithms()
        rep = dumbbell.flow(h.kernel_name, 1.0, during=check_ss)
    assert rep["algorithm"] == h.kernel_name          # getsockopt on the sender
    assert seen["flows"][0]["algorithm"] == h.kernel_name  # ss -tin in the namespace
    assert rep["bytes"] > 4 * 2**20                    # ~12 MB/s bottleneck for 1 s
    assert h.kernel_name not in cc.available_algorithms()


@pytest.mark.parametrize("variant", cc.VARIANTS)
def test_decrease_ratio_after_loss(dumbbell, variant):
    # cwnd and ssthresh are taken in the kernel at the state change (LossProbe),
    # not from TCP_INFO samples, so a late sampler cannot shift "cwnd before".
    dumbbell.drop_every(2500)
    with cc.loaded(variant) as h:
        g0 = cc.guard_stats(h)
        rep = dumbbell.flow(h.kernel_name, 1.6, rcvbuf=100000, probe=True)
        g1 = cc.guard_stats(h)
    guard = {k: g1[k] - g0[k] for k in g0}
    events = loss_events(rep["events"])
    assert events, f"no loss event recorded (probe misses: {rep['probe_misses']})"
    assert guard["reductions"] >= 1, guard
    # A threshold no port computes can only come from a host that ran the stack's hook
    # without the port's program (cc316.h, host-fault guard): the guard must have seen
    # each such reduction, and the value is one no stack could hold (above 2^31 - 1).
    foreign = [e for e in rep["events"] if INF != e["prior_ssthresh"] > 0xFFFFFFFF // 128
               and e["prior_cwnd"] <= 0xFFFFFFFF // 128]
    foreign += [e for c, s, ss, e in events if s != expected_ssthresh(variant, c, ss, e)]
    assert len({id(e) for e in foreign}) <= guard["missed_reductions"] + guard["foreign_ssthresh"], (
        f"{variant}: thresholds no port computes, not seen by the guard ({guard}): {foreign[:3]}")
    assert all(e["ssthresh"] > INF or e["prior_ssthresh"] > INF for e in foreign), foreign[:3]
    for c, s, ss, e in events:
        assert e["ca"] == h.kernel_name, e
        if e in foreign:
            continue
        want = expected_ssthresh(variant, c, ss, e)
        assert s == want, (f"{variant}: cwnd {c} -> ssthresh {s}, expected {want}"
                           f"{' (not a value the port computes)' if s > c else ''}; {e}")
    # the probe watched this very socket: every ssthresh TCP_INFO showed after the
    # first loss was set by a recorded event (or restored from one by an undo).
    # Not for CUBIC: 3.16 HyStart may set ssthresh = cwnd in any state; nor for Vegas and
    # YeAH, whose once-per-RTT decisions set it too (Vegas: tcp_current_ssthresh, YeAH's
    # precautionary decongestion), nor for Westwood, which sets it when a reduction
    # completes (CA_EVENT_COMPLETE_CWR, no state change of its own: seen once as a value
    # no state change recorded); not where the guard repaired a threshold (that value
    # is the port's, set outside any event).
    if variant in SETS_SSTHRESH_OUTSIDE_EVENTS or foreign or guard["missed_reductions"]:
        return
    recorded = {e[k] for e in rep["events"] for k in ("ssthresh", "prior_ssthresh")}
    first = next(i for i, x in enumerate(rep["samples"]) if x[SSTHRESH] != INF)
    seen = {x[SSTHRESH] for x in rep["samples"][first:]}
    assert seen <= recorded, (sorted(seen - recorded), sorted(recorded))


def _ca_segment(samples, max_cwnd=None, min_cwnd=0):
    """Samples in congestion avoidance after the single induced loss, Open state,
    no further retransmission."""
    first_loss = next(i for i, s in enumerate(samples) if s[RETRANS] > 0)
    back_open = next(i for i in range(first_loss, len(samples)) if samples[i][STATE] == 0)
    retrans = samples[back_open][RETRANS]
    seg = [s for s in samples[back_open:]
           if s[STATE] == 0 and s[RETRANS] == retrans and s[CWND] > s[SSTHRESH]
           and (max_cwnd is None or s[CWND] <= max_cwnd) and s[CWND] >= min_cwnd]
    if len(seg) <= 50:
        return None  # the flow left no clean congestion-avoidance stretch to measure
    return seg[len(seg) // 10:]  # skip the first ACKs after recovery


SEGMENT_TRIES = 3


def _growth(variant, impl, db, seconds=1.4, max_cwnd=None, min_cwnd=0, drop_index=299):
    # The set-up, not the behaviour: a second retransmission after the induced loss (a
    # busy shared host) leaves no Open-state stretch, or one too short to measure (fewer
    # than 100 ACKs, or the window grew by 10 segments or less: seen as 41 -> 49 in 170
    # ACKs, on the table's line); such a flow is measured again. The growth asserted by
    # the callers is the same for every flow that is measured.
    measured = []
    for _ in range(SEGMENT_TRIES):
        db.drop_every(10**6, drop_index)  # one loss in slow start, then congestion avoidance
        with cc.loaded(variant, impl=impl) as h:
            rep = db.flow(h.kernel_name, seconds)
        seg = _ca_segment(rep["samples"], max_cwnd, min_cwnd)
        if seg is None:
            measured.append(None)
            continue
        a, b = seg[0], seg[-1]
        c0, c1 = a[2], b[2]
        acks = b[SEGS_IN] - a[SEGS_IN]
        measured.append((c0, c1, acks))
        if c1 > c0 + 10 and acks > 100:
            return c0, c1, acks, b[DELIVERED] - a[DELIVERED]
    raise AssertionError(f"no congestion-avoidance stretch long enough to measure in {SEGMENT_TRIES} flows "
                         f"((cwnd from, to, ACKs) per flow: {measured})")


def test_reno316_grows_half_as_fast_as_native_with_delayed_acks(dumbbell):
    # growth per window of delivered packets ("per RTT"): (c1^2 - c0^2) / (2 pkts).
    # 3.16 adds 1/cwnd per ACK, so per window it adds ACKs/packets (~0.5 with
    # delayed ACKs); 6.x adds 1/cwnd per packet, i.e. ~1 per window.
    per_rtt, acks_per_pkt = {}, {}
    for impl in ("port", "native"):
        # a receiver whose reader falls behind on a loaded host ACKs its window updates too
        # (in the whole suite once: 0.99 ACKs per packet): such a flow is measured again
        for _ in range(3):
            c0, c1, acks, pkts = _growth("reno", impl, dumbbell)
            if acks / pkts < 0.8:
                break
        per_rtt[impl] = (c1 * c1 - c0 * c0) / (2 * pkts)
        acks_per_pkt[impl] = acks / pkts
    assert acks_per_pkt["port"] < 0.8, "receiver is not delaying ACKs"
    assert abs(per_rtt["port"] - acks_per_pkt["port"]) <= 0.2 * acks_per_pkt["port"], (per_rtt, acks_per_pkt)
    assert 0.8 <= per_rtt["native"] <= 1.2, per_rtt
    # the port's growth is explained by its ACKs (3.16), not by its packets (6.x). A fixed
    # bound, port < 0.8 x native, failed once where the ACK ratio itself was 0.797
    # (receivers since 6.6 ACK PSH segments at once, and the sender pushes every half window)
    assert abs(per_rtt["port"] - acks_per_pkt["port"]) < abs(per_rtt["port"] - per_rtt["native"]), \
        (per_rtt, acks_per_pkt)


def test_scalable316_adds_one_per_50_acks(dumbbell):
    # 3.16 counting: cwnd++ on the ACK that finds the counter at 50, i.e. every 51 ACKs
    c0, c1, acks, _ = _growth("scalable", "port", dumbbell, seconds=1.0)
    assert c0 > 50
    assert abs((c1 - c0) - acks / 51) <= 0.1 * acks / 51 + 2, (c0, c1, acks)


def test_highspeed316_increase_follows_the_table(dumbbell):
    # band 1 (38 < cwnd <= 118): cwnd += 2/cwnd per ACK -> (c1^2 - c0^2)/2 = 2 * acks
    c0, c1, acks, _ = _growth("highspeed", "port", dumbbell, seconds=1.4, max_cwnd=118,
                              min_cwnd=40, drop_index=59)
    assert c0 > 38
    got = (c1 * c1 - c0 * c0) / 2 / acks
    assert 1.7 <= got <= 2.3, (c0, c1, acks, got)


def test_lp316_yields_to_its_own_queue_with_timestamps(dumbbell):
    # TCP-LP needs TCP timestamps, off on the paper's hosts (there it is Reno: the host
    # harness checks that). With timestamps (2: without 6.x's random per-connection
    # offsets, which 3.16 peers did not have and which overflow 3.16's 32-bit smoothed OWD)
    # the queue it builds at the bottleneck raises the one-way delay: early congestion
    # indications, cwnd 1 within inference -- with no loss at all (the queue never drops).
    for ns in (dumbbell.S, dumbbell.D):
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.tcp_timestamps=2"], check=True)
    # A flow the host itself harmed is measured again, up to three times: on CI's loaded
    # host a burst once overflowed a CPU's input backlog (a loss the path does not have)
    # and LP halved for it (one ssthresh() call), which says nothing about LP; another
    # time frames came out of order and the sender entered a recovery it then undid.
    # So is one in which LP never inferred: it keeps the largest one-way delay but one as its
    # maximum (lp316.c, owd_max_rsv), and two hypervisor stalls lift that maximum, and its
    # threshold of 15 % of the range above the minimum, over the queue's delay (the AMD VM of
    # 2026-12-07: cwnd never at 1 in one root suite's flow, 3,071 samples; alone, at once).
    with cc.loaded("lp") as h:
        for _ in range(3):
            g0, f0 = cc.guard_stats(h), dumbbell.host_faults()
            rep = dumbbell.flow(h.kernel_name, 1.2, probe=True)
            g1, f1 = cc.guard_stats(h), dumbbell.host_faults()
            faults = {k: f1[k] - f0[k] for k in f1 if f1[k] != f0[k]}
            cwnd = [x[CWND] for x in rep["samples"]]
            if not faults and cwnd.count(1) >= 50:
                break
    assert not faults, f"the host dropped or stalled this flow in three tries: {faults}"
    states = [(e["old"], e["new"], e["cwnd"], e["total_retrans"]) for e in rep["events"]]
    # no loss, no ssthresh() call (on failure: the kernel's state changes of the flow)
    assert g1["reductions"] == g0["reductions"], states
    assert max(x[RETRANS] for x in rep["samples"]) == 0
    # Without a loss, only LP's own inference takes cwnd to 1, and holds it there for
    # a while (>= 50 samples, ~15 ms). How long depends on the host's delay noise: 48-99 %
    # of the samples here, 9 % (294 of 3,256) on CI's host; within three flows.
    assert cwnd.count(1) >= 50, (min(cwnd), max(cwnd), cwnd.count(1), len(cwnd))


def test_loading_twice_is_harmless_and_unload_leaves_nothing():
    # Only this test's own struct_ops map is judged: maps of other runs on a shared host
    # may still be held by the kernel (see the closing note of issue 3).
    before = cc.struct_ops_map_ids("cubic316")
    with cc.loaded("cubic") as a:
        with cc.loaded("cubic") as b:
            assert a is b
        assert "cubic316" in cc.available_algorithms()
        ours = cc.struct_ops_map_ids("cubic316") - before
        assert len(ours) == 1, ours
    assert "cubic316" not in cc.available_algorithms()
    deadline = time.monotonic() + 5
    while ours & cc.struct_ops_map_ids("cubic316") and time.monotonic() < deadline:
        time.sleep(0.2)  # the map goes once the last reference to it is dropped
    assert not ours & cc.struct_ops_map_ids("cubic316")


def test_sigterm_unregisters():
    code = ("import time, tcpeval.cc as cc\n"
            "with cc.loaded('htcp'):\n"
            "    print('in', flush=True)\n"
            "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "in"
        assert "htcp316" in cc.available_algorithms()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "htcp316" not in cc.available_algorithms()


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["highspeed", "reno"])
def test_decrease_ratio_after_loss_under_cpu_and_memory_load(dumbbell, variant):
    """The same exact decrease while stress-ng keeps both CPUs and the memory system busy
    (the load under which a host's skipped hooks showed most; `make test-all`)."""
    import shutil
    if shutil.which("stress-ng") is None:
        pytest.skip("needs stress-ng")
    load = subprocess.Popen(["stress-ng", "--cpu", "2", "--vm", "1", "--vm-bytes", "256M",
                             "--timeout", "60s", "--quiet"])
    try:
        time.sleep(1)
        for _ in range(3):
            test_decrease_ratio_after_loss(dumbbell, variant)
    finally:
        load.terminate()
        load.wait(timeout=30)
