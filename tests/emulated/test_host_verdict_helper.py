"""The tests' rule for a run the host spoiled (emulated_helpers.assert_ok_unless_the_host_fell_behind):
host findings pass with a warning, a loaded RTT above its bound only beside one, anything else fails."""
from __future__ import annotations

import pytest
from emulated_helpers import assert_ok_unless_the_host_fell_behind

LATE_LINK = {"check": "link", "transient": True, "text": "link: 354/33390 data frames left late",
             "fell_behind": True}
STALLED = {"check": "delay line", "transient": True, "text": "delay line: 40 frames in host stalls",
           "fell_behind": True, "host_stall": True}
LOADED = {"check": "loaded RTT", "transient": True, "text": "loaded RTT: 7.82 ms above 7.66",
          "measured": 7.82, "limit": 7.66}
SHORT_PATH = {"check": "loaded RTT", "transient": True, "text": "loaded RTT: 0.48 ms, below the 1.2 ms RTT",
              "measured": 0.48, "limit": 1.14}
ACK_CLOCK = {"check": "ACK clock", "transient": False, "text": "ACK clock: 4 segments per ACK"}


def _record(*findings: dict) -> dict:
    return {"fidelity": {"verdict": "flagged" if findings else "ok", "findings": list(findings),
                         "reasons": [f["text"] for f in findings]}}


def test_an_ok_run_passes_quietly(recwarn):
    assert_ok_unless_the_host_fell_behind(_record())
    assert not recwarn.list


def test_a_loaded_rtt_beside_late_frames_passes_with_a_warning():
    with pytest.warns(UserWarning, match="loaded RTT"):
        assert_ok_unless_the_host_fell_behind(_record(LATE_LINK, LOADED))


@pytest.mark.parametrize("findings", [(LOADED,), (STALLED, LOADED), (LATE_LINK, ACK_CLOCK), (LATE_LINK, SHORT_PATH)],
                         ids=["loaded-rtt-alone", "loaded-rtt-beside-stalls-only", "ack-clock-beside-late-frames",
                              "short-path-beside-late-frames"])
def test_a_finding_the_host_did_not_explain_fails(findings):
    with pytest.raises(AssertionError):
        assert_ok_unless_the_host_fell_behind(_record(*findings))
