"""iperf3 flows: servers on the receivers, clients on the senders, JSON parsed into the
trace's columnar samples."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tcpeval.backends import common
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import ccadapter, host, topology

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
    interrupted: bool = False         # ended early (a precision-driven run stopped it)

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
                                 stdout=open(self.server_path, "wb"),
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

    @property
    def server_path(self) -> Path:
        """The server's own JSON: the receiver's intervals of a flow interrupted early."""
        return self.out_path.with_suffix(".server.json")

    def interrupt(self) -> None:
        """End the flow now, as iperf3 does on Ctrl-C: both ends write their JSON so far."""
        if self.client is not None and self.client.poll() is None:
            self.client.send_signal(signal.SIGINT)
            self.interrupted = True

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
    """Columnar samples and a summary from the client's JSON (and, for a flow interrupted
    early, the server's own: the client then has no receiver report)."""
    try:
        data = json.loads(flow.out_path.read_text())
        if flow.interrupted:
            data = interrupted_report(data, json.loads(flow.server_path.read_text()))
    except (OSError, json.JSONDecodeError) as err:
        raise BackendError(f"flow {flow.index}: iperf3 JSON {flow.out_path.name} unreadable: {err}") from None
    return common.parse_iperf3(data, flow.index, flow.protocol)


def interrupted_report(client: dict, server: dict) -> dict:
    """A client's report of a test we interrupted, made whole from the server's: its
    "interrupt" error dropped (we asked for it), the server's intervals and receiver
    summary in place of the ones --get-server-output would have fetched."""
    if "interrupt" not in str(client.get("error", "")):
        return client  # another error: parse_iperf3 reports it
    out = {k: v for k, v in client.items() if k != "error"}
    out["server_output_json"] = {"intervals": server.get("intervals", [])}
    received = (server.get("end", {}).get("streams") or [{}])[0].get("receiver")
    end = dict(out.get("end", {}))
    streams = [dict(s) for s in end.get("streams") or [{}]]
    if received:
        streams[0]["receiver"] = received
    end["streams"] = streams
    out["end"] = end
    return out


def flow_procs(plan, handles: list, run_dir: Path, place: dict, receiver_env: dict) -> list[FlowProc]:
    """One iperf3 pair per flow of the (physical) plan, not yet started."""
    return [FlowProc(index=i, kernel_name=handle.kernel_name if handle else None,
                     protocol=flow.protocol, start_s=flow.start_s, stop_s=flow.stop_s,
                     duration_s=flow.end_s(plan.duration_s) - flow.start_s, interval_s=plan.interval_s,
                     rate_bps=flow.rate_bps, out_path=run_dir / f"iperf3-flow{i}.json",
                     err_path=run_dir / f"iperf3-flow{i}.log",
                     sender_cpu=place["sender_apps"][i], receiver_cpu=place["receiver_apps"][i],
                     receiver_env=receiver_env)
            for i, (flow, handle) in enumerate(zip(plan.flows, handles))]


def start_servers(topo: topology.Topology, flows: list[FlowProc], stack) -> None:
    """Every flow's server, listening; each flow stopped when ``stack`` closes."""
    for f in flows:
        stack.callback(f.stop)
        f.start_server(topo)
    wait_listening(topo, [f.pair for f in flows])


# Flows end within common.FINISH_GRACE_S after the duration, plus this many RTTs (more
# under loss: see drive)
FINISH_GRACE_RTTS = 120
SS_FIRST_LOOK_S = 0.5  # ss -ti after a flow's start: this long plus SS_SETUP_RTTS RTTs
SS_SETUP_RTTS = 6
SS_TRIES = 10


def drive(flows: list[FlowProc], topo: topology.Topology, delayer, t0: float, plan, log,
          midway=None, at_end=None, checkpoints_s: tuple = (), watch=None) -> float | None:
    """Start clients at their offsets; watch every process; stop when all are done.
    midway(mark), if given, runs once at half the run's duration and at each of
    checkpoints_s (mark: that time, in seconds after t0), at_end() once at its end (the clients, which started a little
    after t0, still send then). A precision watch (precision_watch.PrecisionWatch) may end
    the run early: every client is interrupted and at_end runs then. Returns when the
    run was stopped early (seconds after t0), else None."""
    pending = sorted(flows, key=lambda f: f.start_s)
    # iperf3 ends a test over its control connection, which meets the path's losses and
    # retransmission timeouts too: on a long lossy path (512 ms, 30 %) that takes many RTTs
    grace_s = (common.FINISH_GRACE_S
               + FINISH_GRACE_RTTS * plan.rtt_ms / 1000 / max(1e-3, 1 - plan.drop) ** 2)
    deadline = t0 + plan.duration_s + grace_s
    next_note = t0 + 5.0
    # iperf3 opens the data socket a few round trips after the control one: on a long
    # (or time-dilated) path the first look may find the control socket alone
    ss_first_look_s = SS_FIRST_LOOK_S + SS_SETUP_RTTS * plan.rtt_ms / 1000
    marks = sorted({plan.duration_s / 2, *checkpoints_s}) if midway else []
    stopped_at = None
    while True:
        now = time.monotonic()
        while marks and now >= t0 + marks[0]:
            midway(marks.pop(0))
        if at_end and now >= t0 + plan.duration_s:
            at_end()
            at_end = None
        while pending and now >= t0 + pending[0].start_s and stopped_at is None:
            f = pending.pop(0)
            f.start_client(topo)
            log(f"flow {f.index} started ({f.kernel_name or 'udp'}) at {now - t0:.2f} s")
        for f in flows:
            check_socket_cc(f, topo, now, ss_first_look_s)
        if watch and stopped_at is None and watch.due(now - t0) and watch.check(now - t0):
            stopped_at = now - t0
            pending.clear()
            for f in flows:
                f.interrupt()
            if at_end:
                at_end()
                at_end = None
            marks = []
        _check_alive(flows, delayer, allow_interrupted=stopped_at is not None)
        for f in flows:
            if f.client is not None and f.ended_at is None and f.client.poll() is not None:
                f.ended_at = now
                if f.stop_s is not None:
                    log(f"flow {f.index} stopped at {now - t0:.2f} s")
        if not pending and all(f.client is None or f.client.poll() is not None for f in flows):
            return stopped_at
        if now > deadline:
            raise BackendError(f"flows did not finish within duration + {grace_s:.0f} s")
        if now >= next_note:
            log(f"... {now - t0:.0f}/{plan.duration_s:g} s")
            next_note += 5.0
        wake = [t0 + m for m in marks[:1]] + ([t0 + plan.duration_s] if at_end else [])
        if watch and stopped_at is None and watch.wake_at() is not None:
            wake.append(t0 + watch.wake_at())   # sample on time, one per reporting interval
        time.sleep(min([0.05] + [max(0.0, m - time.monotonic()) for m in wake]))


def check_socket_cc(f: FlowProc, topo: topology.Topology, now: float, first_look_s: float) -> None:
    """Read the algorithm back from the flow's live sockets (ss -ti): retried while the
    connection is not yet (or no longer) listed, judged once it is."""
    if not (f.protocol == "tcp" and not f.ss_algorithms and f.ss_tries < SS_TRIES and f.started_at
            and now - f.started_at > min(first_look_s + 0.3 * f.ss_tries, f.duration_s / 2)):
        return
    f.ss_tries += 1
    algs = [a for a in ccadapter.socket_algorithms(topo.ns(f"s{f.pair}"), PORT) if a]
    if not f.default_cc_set and f.kernel_name not in algs and len(algs) < 2 and f.ss_tries < SS_TRIES:
        return  # the control socket (namespace default) alone: look again
    f.ss_algorithms = algs
    wrong = [a for a in algs if a != f.kernel_name]
    if not f.default_cc_set and f.kernel_name in algs:
        wrong = []  # only the data socket carries -C; the control one has the default
    if not f.default_cc_set and set(wrong) <= {common.STACK_316[common.CC_SYSCTL]}:
        # the control socket alone (on a lossy path the data socket may not be up yet):
        # no evidence against -C; iperf3's own report is checked after
        wrong = []
    if algs and wrong:
        raise BackendError(f"flow {f.index}: ss -ti shows congestion control "
                           f"{wrong} on its sockets, asked for {f.kernel_name!r}")


def _check_alive(flows: list[FlowProc], delayer, allow_interrupted: bool = False) -> None:
    """Every iperf3 process still running or done cleanly (an interrupted flow's ends exit
    with status 1, as iperf3 does on Ctrl-C), and the delay line alive."""
    for f in flows:
        interrupted = allow_interrupted and f.interrupted
        for proc, end in ((f.client, "client"), (f.server, "server")):
            if proc is not None and proc.poll() is not None and proc.returncode != 0 \
                    and not (interrupted and proc.returncode == 1):
                raise BackendError(f"flow {f.index}: iperf3 {end} {describe_exit(proc)}; "
                                   f"see {f.err_path.name if end == 'client' else f.server_path.name}")
    if not delayer.alive():
        raise BackendError("the delay line died during the run; see delayline.log")
