"""The link engine's snapshots are read whole: a line the engine is still writing is
waited for, not parsed half written (a 30-min run failed on one, 2026-11-30)."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from tcpeval.backends.emulated.delay import DelayLine

LINE = {"mono_ns": 68344484949662, "sent": 34747229, "sent_bytes": 52607225796, "tail_drops": 38670,
        "acks_forwarded": 18805942, "acks_held": 0, "acks_not_sent": 7}

# On SIGUSR1 it appends a snapshot in two writes 0.2 s apart, as a write that straddles a
# page of the file can be seen by a reader between its pages.
WRITER = f"""
import signal, sys, time
line = {json.dumps(json.dumps(LINE))} + "\\n"
def snap(*_):
    with open(sys.argv[1], "a") as f:
        f.write(line[:40]); f.flush(); time.sleep(0.2); f.write(line[40:])
signal.signal(signal.SIGUSR1, snap)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_a_snapshot_half_written_is_waited_for_not_parsed(tmp_path):
    stats = tmp_path / "delayline.json"
    snap = tmp_path / "delayline.json.snap"
    snap.write_text(json.dumps({**LINE, "acks_not_sent": 0}) + "\n")   # an earlier snapshot
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(snap)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        line = DelayLine.__new__(DelayLine)          # the reader alone: no namespaces, no engine
        line.link, line.proc, line.stats_path = {"rate_bps": 1e9}, proc, stats
        t0 = time.monotonic()
        got = line.link_counters(timeout_s=2.0)
        assert got == {"t_s": LINE["mono_ns"] / 1e9, "bytes": LINE["sent_bytes"], "frames": LINE["sent"],
                       "drops": LINE["tail_drops"], "acks_not_sent": 7, "acks_forwarded": LINE["acks_forwarded"]}
        assert time.monotonic() - t0 >= 0.2          # it waited for the line's end
    finally:
        proc.kill()
        proc.wait()
