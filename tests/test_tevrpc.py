"""tevrpc (backends/emulated/rpc/tevrpc.c), the request/response flows' tool, on loopback
as a normal user: what its two ends count and time, open-loop latencies that include the
wait behind a stalled server (no coordinated omission), and the input it refuses."""
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tcpeval.backends.emulated import build


@pytest.fixture(scope="module")
def tevrpc() -> str:
    return str(build.ensure_built().tevrpc)


@pytest.fixture
def spawn():
    """Starts processes; any still running at the end (a failed test) is killed."""
    started = []

    def start(*args) -> subprocess.Popen:
        proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a stopped one too
            proc.kill()
        proc.communicate()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def finish(proc: subprocess.Popen, timeout: float = 8.0) -> int:
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return proc.returncode


def rpc_pair(spawn, tevrpc, tmp_path, *call_args, server_args=()):
    """A server and a client of it; their output paths."""
    port = free_port()
    server_out, client_out = tmp_path / "server.json", tmp_path / "client.json"
    server = spawn(tevrpc, "serve", "--port", port, "--out", server_out, *server_args)
    client = spawn(tevrpc, "call", "--connect", f"127.0.0.1:{port}", "--out", client_out,
                   *call_args)
    return server, client, server_out, client_out


def test_closed_loop_counts_every_response_byte_on_both_ends(tevrpc, spawn, tmp_path):
    default_cc = Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()
    server, client, server_out, client_out = rpc_pair(
        spawn, tevrpc, tmp_path, "--request", 100, "--response", 10000, "--duration", 1,
        "--cc", default_cc, server_args=("--cc", default_cc))
    finish(client)
    finish(server)
    got, sent = json.loads(client_out.read_text()), json.loads(server_out.read_text())

    assert (got["tool"], got["role"], got["rate_per_s"], got["stopped_by"]) == ("tevrpc", "client", None, "duration")
    assert got["completed"] > 50 and got["unfinished"] == 0 and got["issued"] == got["completed"]
    assert len(got["rpcs"]["start_s"]) == len(got["rpcs"]["latency_us"]) == got["completed"]
    assert all(latency > 0 for latency in got["rpcs"]["latency_us"])
    # closed loop: each RPC starts after the previous one completed, and none at or after 1 s
    starts, latencies = got["rpcs"]["start_s"], got["rpcs"]["latency_us"]
    assert all(s2 >= s1 + lat / 1e6 - 1e-6 for s1, lat, s2 in zip(starts, latencies, starts[1:]))
    assert starts[-1] < 1.0
    assert sum(got["intervals"]["bytes"]) == got["completed"] * 10000 == got["bytes_received"]
    assert got["intervals"]["t_s"][:10] == pytest.approx([0.1 * k for k in range(1, 11)], abs=1e-9)
    assert got["intervals"]["t_s"][-1] >= 1.0

    assert (sent["role"], sent["stopped_by"]) == ("server", "eof")
    assert sent["rpcs"] == got["completed"] and sent["bytes_sent"] == got["bytes_received"]
    samples = sent["intervals"]
    assert len(samples["t_s"]) >= 5
    assert all(v > 0 for v in samples["cwnd_bytes"]) and all(v > 0 for v in samples["rtt_us"])
    assert samples["bytes_acked"] == sorted(samples["bytes_acked"])  # cumulative
    assert sent["end"]["bytes_acked"] == sent["bytes_sent"] and sent["end"]["min_rtt_us"] > 0
    assert got["cc_requested"] == sent["cc_requested"] == default_cc
    assert got["cc_verified"] == sent["cc_verified"] == default_cc


def test_open_loop_issues_on_schedule_at_i_over_rate(tevrpc, spawn, tmp_path):
    server, client, _, client_out = rpc_pair(
        spawn, tevrpc, tmp_path, "--request", 200, "--response", 1000, "--duration", 1,
        "--rate", 200)
    finish(client)
    finish(server)
    got = json.loads(client_out.read_text())

    assert got["rate_per_s"] == 200 and got["stopped_by"] == "duration"
    assert got["issued"] == 200 and got["completed"] == got["issued"] and got["unfinished"] == 0
    assert got["rpcs"]["start_s"] == pytest.approx([i / 200 for i in range(200)], abs=1e-6)
    assert all(latency > 0 for latency in got["rpcs"]["latency_us"])
    assert got["bytes_received"] == 200 * 1000


def test_open_loop_latency_counts_the_wait_behind_a_stalled_server(tevrpc, spawn, tmp_path):
    server, client, _, client_out = rpc_pair(
        spawn, tevrpc, tmp_path, "--request", 100, "--response", 1000, "--duration", 1.2,
        "--rate", 200)
    time.sleep(0.4)
    os.kill(server.pid, signal.SIGSTOP)
    while Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        time.sleep(0.001)
    stopped_at = time.time()  # the server answers nothing from here ...
    time.sleep(0.3)
    resumed_at = time.time()  # ... until after this
    os.kill(server.pid, signal.SIGCONT)
    finish(client)
    finish(server)
    got = json.loads(client_out.read_text())

    pause_start = stopped_at - got["connected_at_unix"]
    pause_end = resumed_at - got["connected_at_unix"]
    assert 0.1 < pause_start and pause_end < 1.1  # the pause fell inside the run
    assert got["completed"] == got["issued"] == 240
    waited = [(start, latency / 1e6) for start, latency in zip(got["rpcs"]["start_s"], got["rpcs"]["latency_us"])
              if pause_start <= start < pause_end]
    assert len(waited) >= 55  # 0.3 s at 200/s
    for start, latency in waited:
        assert latency >= (pause_end - start) - 0.005, (start, latency, pause_end)
    assert waited[0][1] >= 0.29


@pytest.mark.parametrize("args, named", [
    (["call", "--connect", "127.0.0.1:9", "--request", 4, "--response", 10, "--duration", 1], "--request"),
    (["call", "--connect", "127.0.0.1:9", "--request", 100, "--duration", 1], "--response"),
    (["call", "--connect", "127.0.0.1:{port}", "--request", 100, "--response", 10, "--duration", 1,
      "--cc", "nosuchalg", "--connect-timeout-ms", 300], "nosuchalg"),
    (["serve", "--port", "{port}", "--cc", "nosuchalg"], "nosuchalg"),
], ids=["request-below-header", "response-missing", "call-cc-unknown", "serve-cc-unknown"])
def test_bad_input_is_refused_naming_it_and_writes_nothing(tevrpc, tmp_path, args, named):
    port = free_port()
    args = [str(a).format(port=port) for a in args] + ["--out", str(tmp_path / "out.json")]
    proc = subprocess.run([tevrpc, *args], capture_output=True, text=True, timeout=5)

    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_sigint_stops_the_client_with_what_completed(tevrpc, spawn, tmp_path):
    server, client, server_out, client_out = rpc_pair(
        spawn, tevrpc, tmp_path, "--request", 100, "--response", 1000, "--duration", 10,
        "--rate", 500)
    time.sleep(0.5)
    client.send_signal(signal.SIGINT)
    finish(client, timeout=3)
    finish(server, timeout=3)
    got, sent = json.loads(client_out.read_text()), json.loads(server_out.read_text())

    assert got["stopped_by"] == "signal"
    assert 100 < got["completed"] <= got["issued"] < 1000
    assert got["intervals"]["t_s"][-1] < 2
    assert sum(got["intervals"]["bytes"]) == got["bytes_received"]
    assert sent["stopped_by"] == "eof" and sent["rpcs"] >= got["completed"]
