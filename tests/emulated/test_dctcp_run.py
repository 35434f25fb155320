"""DCTCP (cc/src/dctcp_tev.c) on the emulated path with ECN marking at the link: it runs on
both ends (its receiver echoes the marks), reacts to the marked fraction instead of halving,
and so keeps the link full with a queue held near K, where Reno with the same marks saws."""
from __future__ import annotations

import time
from dataclasses import replace

import pytest
from emulated_helpers import (
    TEST_ATTEMPTS,
    assert_ok_unless_the_host_fell_behind,
    nothing_left,
    run_id_of,
)

from tcpeval import trace
from tcpeval.backends import fidelity
from tcpeval.backends.base import retry_pause_s
from tcpeval.condition import payload_ceiling_bps
from tcpeval.spec import adhoc_condition

pytestmark = pytest.mark.root

RTT_MS, DURATION_S, BUFFER = 2.0, 8.0, 250_000

# What this VM's hypervisor does to a port's runs may flag the DCTCP run, and only that: it
# skips BPF hooks now and then (docs/fidelity.md, "Skipped hooks are judged by what they
# did"), and DCTCP, which trims its window some 120 times a second here, meets it far more
# often than a port that waits for losses. On this VM the skipped hooks touched 1.2-2.9 % of
# its data (4 of 5 attempts above the verdict's 2 %), in CI's container 2.2-4.0 % (5 of 5).
# The port's guard repairs each skip, and what the test pins below is DCTCP's own behaviour;
# a share far above the host's is not the host's doing.
HOST_SKIPPED_SHARE_MAX = 0.08


# Where every ACK of a CWR came in while the host skipped the hooks, the skipped ssthresh()'s
# threshold of 0 drained the window and the flow waited ~0.2 s for the probe timer (docs/
# fidelity.md, "A skipped hook's threshold of 0"); the guard times these stalls and the
# verdict adds them to the cc share. On this VM on 2026-11-28 4 of 5 runs had one to four
# (212-434 ms of 8 s). The test judges the data share of the skipped hooks as above, and
# DCTCP's window and rate over the samples it was in control of: the stalls' samples (and
# the one after each, slow start back to the window) are left out, at most a quarter.
STALL_SAMPLE_SHARE = 0.5   # a sample below this share of the half's median rate: a stall
STALLED_SAMPLES_MAX = 0.25


def _findings_but_skipped_hooks(record: dict) -> list[dict]:
    """The run's findings, less a cc finding (skipped hooks) whose data share is within the
    host's (the drained stalls are left to _in_control)."""
    guard = record["measured"]["cc_guard"]["dctcp_tev"]
    return [f for f in record["fidelity"]["findings"]
            if not (f["check"] == "cc" and fidelity.skipped_share(guard) <= HOST_SKIPPED_SHARE_MAX)]


def _in_control(record: dict) -> list[tuple[float, float, float]]:
    """The second half's samples (t, cwnd, throughput) less the host's stalls and the
    sample after each."""
    s = record["flows"][0]["samples"]
    half = [(t, w, b) for t, w, b in zip(s["t_s"], s["cwnd_bytes"], s["throughput_bps"]) if t > DURATION_S / 2]
    median = sorted(b for _, _, b in half)[len(half) // 2]
    stalled = {i for i, (_, _, b) in enumerate(half) if b < STALL_SAMPLE_SHARE * median}
    kept = [x for i, x in enumerate(half) if i not in stalled and i - 1 not in stalled]
    assert len(kept) >= (1 - STALLED_SAMPLES_MAX) * len(half), (len(kept), len(half))
    return kept


def _run(backend, tmp_path, variant: str, impl: str, rate: float, k: int) -> dict:
    cond = replace(adhoc_condition([variant], RTT_MS, 0.0, DURATION_S, impl=impl, rate_bps=rate,
                                   buffer_bytes=BUFFER, seed=7, dilation=1), ecn_threshold_bytes=k)
    backend.run(cond, tmp_path)
    assert nothing_left(run_id_of(tmp_path))
    return trace.read_trace(tmp_path)


def _run_dctcp(backend_once, tmp_path, rate: float, k: int) -> dict:
    """The DCTCP run, attempted until it has no finding but the host's skipped hooks.
    The backend's own retries judge by the verdict, which the skipped hooks flag in most
    attempts here: it keeps the last, which may also meet one of the host's lateness
    spells (CI, 2026-12-01: the kept attempt had 0.2 % of its frames held back 2 ms or
    more) where an earlier one may have been fit for the test. So one attempt a call,
    judged as the test judges, with the backend's pauses between."""
    for attempt in range(1, TEST_ATTEMPTS):
        record = _run(backend_once, tmp_path / f"attempt-{attempt}", "dctcp", "port", rate, k)
        if not _findings_but_skipped_hooks(record):
            return record
        time.sleep(retry_pause_s(attempt))
    return _run(backend_once, tmp_path / f"attempt-{TEST_ATTEMPTS}", "dctcp", "port", rate, k)


def _steady(record: dict, column: str) -> list[float]:
    s = record["flows"][0]["samples"]
    return sorted(v for t, v in zip(s["t_s"], s[column]) if t > DURATION_S / 2 and v)


def _swing(record: dict) -> float:
    """The sender's window over the run's second half while DCTCP was in control, lower
    quartile / upper quartile: near 0.6 for a sawtooth that halves, near 1 for one trimmed
    by the marked fraction."""
    w = sorted(w for _, w, _ in _in_control(record) if w)
    return w[len(w) // 4] / w[3 * len(w) // 4]


def _extremes(record: dict) -> float:
    """The sender's window over the run's second half, smallest / largest sample."""
    w = _steady(record, "cwnd_bytes")
    return w[0] / w[-1]


def test_dctcp_cuts_by_the_marked_fraction_and_keeps_the_link_full(backend, backend_once, tmp_path, rate_on):
    rate = rate_on("tevlink", RTT_MS)
    bdp = rate / 8 * RTT_MS / 1e3
    k = int(bdp / 6)  # below the BDP: a window halved from BDP + K leaves the link idle
    dctcp = _run_dctcp(backend_once, tmp_path / "dctcp", rate, k)
    reno = _run(backend, tmp_path / "reno", "reno", "native", rate, k)
    flow = dctcp["flows"][0]
    assert flow["cc"]["verified"] == "dctcp_tev" and flow["cc"]["receiver"] == "dctcp_tev"
    assert flow["cc"]["ecn"] == {"negotiated": True, "response": "marked_fraction"}
    assert_ok_unless_the_host_fell_behind(reno)
    assert not _findings_but_skipped_hooks(dctcp), dctcp["fidelity"]["reasons"]
    for record in (dctcp, reno):
        ecn = record["measured"]["ecn"]
        assert ecn["ce_marked"] > 0 and ecn["not_ect_over_threshold"] == 0
    # Reno halves at the first mark of a window and never reaches the tail; nor does DCTCP's
    # window, which follows the marks. What tail drops DCTCP has are the host's: where this
    # VM skips its ssthresh() the stack takes a garbage threshold, PRR lets it send all the
    # socket holds (~470 segments, once every second or so) and the port's next hook repairs
    # it. The guard counts those segments (sent above the window the port allowed) and the
    # skipped reductions, so every drop is one of them and none comes without a skip.
    assert reno["measured"]["delay_line"]["link"]["tail_drops"] == 0
    ecn = dctcp["measured"]["ecn"]
    tail_drops = dctcp["measured"]["delay_line"]["link"]["tail_drops"]
    guard = dctcp["measured"]["cc_guard"]["dctcp_tev"]
    assert tail_drops <= guard["sent_over"], (tail_drops, guard)
    assert tail_drops == 0 or guard["missed_reductions"] + guard["foreign_ssthresh"] > 0, guard
    # a fraction of the frames marked, the window trimmed by it: no sawtooth, a queue near K
    assert 0 < ecn["ce_marked"] / ecn["ect_frames"] < 0.5
    # (Reno's sawtooth at 2 ms lasts about as long as the 0.1-s sampling interval, so its
    # samples alias: their quartiles may lie close together; over the half's 40 samples the
    # phase drifts through the cycle, and the extremes show the halving)
    assert _swing(dctcp) > 0.85 and _extremes(reno) < 0.75
    rtts = _steady(dctcp, "rtt_us")
    assert rtts[len(rtts) // 2] / 1e3 < RTT_MS + 2 * k * 8 / rate * 1e3
    # and the link stays full, where Reno's halving leaves it idle part of the time
    rates = [b for _, _, b in _in_control(dctcp)]
    steady = sum(rates) / len(rates)
    assert steady > 0.85 * payload_ceiling_bps(rate) and steady > reno["measured"]["steady_throughput_bps"]
