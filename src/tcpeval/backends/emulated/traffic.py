"""iperf3 flows: servers on the receivers, clients on the senders, JSON parsed into the
trace's columnar samples."""
from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tcpeval.backends import common
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import host, topology

PORT = common.IPERF3_PORT
# The SYNs cross the drop stage too: five retransmissions (1 + 2 + 4 + 8 + 16 s) let a
# connection through 30 % loss but for 0.3^6 (3 s, two, failed one of ten flows there).
CONNECT_TIMEOUT_MS = "32000"


@dataclass
class FlowProc:
    index: int           # 0-based flow id; runs between s<index+1> and r<index+1>
    kernel_name: str | None
    protocol: str
    start_s: float
    duration_s: float
    interval_s: float
    rate_bps: float | None
    out_path: Path
    err_path: Path
    server: subprocess.Popen | None = None
    client: subprocess.Popen | None = None
    started_at: float | None = None
    ended_at: float | None = None     # when the client was seen to have exited
    stop_s: float | None = None       # scheduled end (run seconds), None: the run's end
    ss_algorithms: list | None = None  # what `ss -ti` showed on the sender's sockets
    default_cc_set: bool = False
    ss_tries: int = 0
    sender_cpu: int | None = None    # iperf3 -A (topology.placement: kept off the
    receiver_cpu: int | None = None  # delay line's CPU where its softirq would follow)
    receiver_env: dict | None = None  # the server's environment (topology.receive_window)

    @property
    def pair(self) -> int:
        return self.index + 1

    def start_server(self, topo: topology.Topology) -> None:
        args = ["iperf3", "-s", "-1", "-p", PORT, *common.iperf3_server_args(self.interval_s)]
        if self.receiver_cpu is not None:
            args += ["-A", self.receiver_cpu]
        if self.receiver_env:
            args = ["env", *(f"{k}={v}" for k, v in self.receiver_env.items()), *args]
        self.server = host.spawn(args, ns=topo.ns(f"r{self.pair}"),
                                 stderr=open(self.err_path.with_suffix(".server.log"), "wb"))

    def start_client(self, topo: topology.Topology) -> None:
        args = ["iperf3", "-c", topology.receiver_ip(self.pair), "-p", PORT, "-J",
                "-t", f"{self.duration_s:g}", "-i", f"{self.interval_s:g}", "--connect-timeout", CONNECT_TIMEOUT_MS,
                "--get-server-output"]
        if self.protocol == "udp":
            args += ["-u", "-b", f"{int(self.rate_bps or 1e9)}"]
        else:
            # -Z (sendfile): the sender's data is not copied from user space -- the
            # saturated CPU's time goes to the path, not to iperf3's buffer
            args += ["-C", self.kernel_name, "-Z"]
        if self.sender_cpu is not None:
            args += ["-A", self.sender_cpu]
        self.started_at = time.monotonic()
        self.client = host.spawn(args, ns=topo.ns(f"s{self.pair}"),
                                 stdout=open(self.out_path, "wb"), stderr=open(self.err_path, "wb"))

    def stop(self) -> None:
        for proc in (self.client, self.server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def wait_listening(topo: topology.Topology, pairs: list[int], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    for pair in pairs:
        while True:
            out = host.run(["ss", "-Hltn", f"sport = :{PORT}"], ns=topo.ns(f"r{pair}"), check=False)
            if out.stdout.strip():
                break
            if time.monotonic() > deadline:
                raise BackendError(f"iperf3 server on r{pair} is not listening after {timeout} s")
            time.sleep(0.02)


def describe_exit(proc: subprocess.Popen) -> str:
    rc = proc.returncode
    return f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"


def parse(flow: FlowProc) -> dict:
    """Columnar samples and a summary from the client's JSON."""
    try:
        data = json.loads(flow.out_path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BackendError(f"flow {flow.index}: iperf3 JSON {flow.out_path.name} unreadable: {err}") from None
    return common.parse_iperf3(data, flow.index, flow.protocol)
