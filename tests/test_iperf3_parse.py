"""Throughput is what the receiver got: a real iperf3 pair on loopback (no root needed)."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest

from tcpeval.backends import common

pytestmark = pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_samples_and_mean_are_the_receivers_and_the_sender_is_kept_beside(tmp_path):
    port = str(_free_port())
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", port, *common.iperf3_server_args(0.1)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", port, "-J", "-t", "1", "-i", "0.1",
                              "-b", "200M", "--get-server-output"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    finally:
        server.wait(timeout=10)
    data = json.loads(out)
    parsed = common.parse_iperf3(data, 0)
    s, summary = parsed["samples"], parsed["summary"]
    received = [iv["streams"][0] for iv in data["server_output_json"]["intervals"]]
    sent = [iv["streams"][0] for iv in data["intervals"]]
    n = len(s["t_s"])
    assert parsed["samples_side"] == "receiver" and n >= 9
    assert s["bytes"] == [r["bytes"] for r in received[:n]]
    assert s["throughput_bps"] == [r["bits_per_second"] for r in received[:n]]
    assert s["sent_bytes"] == [x["bytes"] for x in sent[:n]]
    assert summary["throughput_side"] == "receiver"
    assert summary["bytes"] == data["end"]["streams"][0]["receiver"]["bytes"]
    assert summary["sent_bytes"] == data["end"]["streams"][0]["sender"]["bytes"]
    assert 1.5e8 < summary["mean_throughput_bps"] < 2.5e8  # -b 200M


def test_without_server_output_the_senders_bytes_are_used_and_said_so():
    data = {"start": {}, "intervals": [{"streams": [{"end": 0.1, "bytes": 1000, "bits_per_second": 8e4}]}],
            "end": {"streams": [{"sender": {"bytes": 1000, "bits_per_second": 8e4}}]}}
    parsed = common.parse_iperf3(data, 0)
    assert parsed["samples_side"] == "sender" and parsed["summary"]["throughput_side"] == "sender"
    assert parsed["samples"]["bytes"] == [1000]
