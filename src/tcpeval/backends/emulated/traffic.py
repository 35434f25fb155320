"""The flows: iperf3 (bulk TCP, UDP) with servers on the receivers and clients on the
senders; tevrpc (request/response, rpc/tevrpc.c) with its server on the sender side, whose
responses cross the bottleneck, and its client on the receiver side. Their JSON is parsed
into the trace's columnar samples."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tcpeval import cc
from tcpeval.backends import common
from tcpeval.backends.base import BackendError
from tcpeval.backends.emulated import host, topology

PORT = common.IPERF3_PORT
RPC_PORT = 5301
# Algorithms (kernel names) with a receive side: DCTCP's receiver decides what its ACKs
# echo of the CE marks and when they leave (RFC 8257 3.2), so the receiver's socket runs
# the flow's algorithm too (tevrcv's TEVRCV_CC; tevrpc call --cc); the rest leave the
# receiver at the namespace's default (reno), which no sender's algorithm reads.
RECEIVE_SIDE = frozenset({"dctcp_tev", "dctcp"})
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
    ss_ecn: bool | None = None         # ... whether the flow's own socket negotiated ECN
    default_cc_set: bool = False
    ss_tries: int = 0
    sender_cpu: int | None = None    # iperf3 -A (topology.placement: kept off the
    receiver_cpu: int | None = None  # delay line's CPU where its softirq would follow)
    receiver_env: dict | None = None  # the server's environment (topology.receive_window)
    interrupted: bool = False         # ended early (a precision-driven run stopped it)
    receiver_cc: str | None = None    # the receiver's algorithm where it has a receive side (RECEIVE_SIDE)
    sender_wrap: object = None        # args -> args: the sender side's processes in the sock_ops cgroup

    tool = "iperf3"   # its programs, by name in messages
    server_side = "r"  # the server's end of the pair: the receiver (the data flow to it)
    server_port = PORT

    @property
    def pair(self) -> int:
        return self.index + 1

    def server_ns(self, topo: topology.Topology) -> str:
        return topo.ns(f"{self.server_side}{self.pair}")

    def start_server(self, topo: topology.Topology) -> None:
        args = ["iperf3", "-s", "-1", "-p", PORT, *common.iperf3_server_args(self.interval_s)]
        if self.receiver_cpu is not None:
            args += ["-A", self.receiver_cpu]
        args = _with_env(args, self.receiver_env)
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
        self.client = host.spawn(args, ns=topo.ns(f"s{self.pair}"), wrap=self.sender_wrap,
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

    def wait_server(self, timeout_s: float = 10.0) -> None:
        """Let the server finish its JSON before it is read (iperf3's is one-off, -1; tevrpc
        writes once the client has closed the connection). An interrupted
        client exits at once; its server writes only once it has read what was still on
        the path and the client's end of the test: at 24.2 ms x6 (145 ms, a 30-MB queue
        ahead of the control connection) that took longer than reading it at once allowed
        (three of three precision-stopped runs failed, their server JSON empty). One still
        running at the timeout is asked to write what it has (SIGTERM)."""
        if self.server is None:
            return
        try:
            self.server.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.server.terminate()
            self.server.wait(timeout_s)

    def stop(self) -> None:
        for proc in (self.client, self.server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


@dataclass
class RpcProc(FlowProc):
    """An RPC flow: ``tevrpc serve`` on the sender (its algorithm: the flow's, set on the
    socket and read back), ``tevrpc call`` on the receiver; same life cycle as FlowProc."""
    request_bytes: int = 0
    response_bytes: int = 0
    rpcs_per_s: float | None = None   # physical (a dilated run's rate / k)
    tevrpc: Path | None = None

    tool = "tevrpc"
    server_side = "s"  # the responses cross the bottleneck: the server is on the sender's side
    server_port = RPC_PORT

    def start_server(self, topo: topology.Topology) -> None:
        args = [str(self.tevrpc), "serve", "--port", str(RPC_PORT), "--out", str(self.server_path),
                "--interval", f"{self.interval_s:g}", "--cc", self.kernel_name]
        self.server = host.spawn(_pinned(args, self.sender_cpu), ns=topo.ns(f"s{self.pair}"), wrap=self.sender_wrap,
                                 stdout=subprocess.DEVNULL,
                                 stderr=open(self.err_path.with_suffix(".server.log"), "wb"))

    def start_client(self, topo: topology.Topology) -> None:
        args = [str(self.tevrpc), "call", "--connect", f"{topology.sender_ip(self.pair)}:{RPC_PORT}",
                "--request", str(self.request_bytes), "--response", str(self.response_bytes),
                "--duration", f"{self.duration_s:g}", "--interval", f"{self.interval_s:g}",
                "--connect-timeout-ms", CONNECT_TIMEOUT_MS, "--out", str(self.out_path)]
        if self.receiver_cc:
            args += ["--cc", self.receiver_cc]
        if self.rpcs_per_s:
            args += ["--rate", f"{self.rpcs_per_s:.9g}"]
        # the receivers' window clamp, as iperf3's servers get it; not their reader
        # wake-up threshold, which would hold a small response back from its reader
        args = _with_env(args, {k: v for k, v in (self.receiver_env or {}).items() if k != "TEVRCV_RCVLOWAT"})
        self.started_at = time.monotonic()
        self.client = host.spawn(_pinned(args, self.receiver_cpu), ns=topo.ns(f"r{self.pair}"),
                                 stdout=subprocess.DEVNULL, stderr=open(self.err_path, "wb"))


def _with_env(args: list, env: dict | None) -> list:
    """``args`` run with ``env`` added to the environment (env NAME=VALUE ...), if any."""
    return ["env", *(f"{k}={v}" for k, v in env.items()), *args] if env else args


def _pinned(args: list[str], cpu: int | None) -> list[str]:
    """``args`` run on ``cpu`` (as iperf3 -A does) where one is given."""
    return args if cpu is None else ["taskset", "-c", str(cpu), *args]


def wait_listening(topo: topology.Topology, flows: list[FlowProc], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    for f in flows:
        ns = f.server_ns(topo)
        while True:
            out = host.run(["ss", "-Hltn", f"sport = :{f.server_port}"], ns=ns, check=False)
            if out.stdout.strip():
                break
            if f.server is not None and f.server.poll() is not None:
                raise BackendError(f"flow {f.index}: {f.tool} server "
                                   f"{describe_exit(f.server)}; see {f.err_path.with_suffix('.server.log').name}")
            if time.monotonic() > deadline:
                raise BackendError(f"{f.tool} server on {ns.split('-', 1)[-1]} "
                                   f"is not listening after {timeout} s")
            time.sleep(0.02)


def describe_exit(proc: subprocess.Popen) -> str:
    rc = proc.returncode
    return f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"


def parse(flow: FlowProc) -> dict:
    """Columnar samples and a summary from the client's JSON (and, for a flow interrupted
    early, the server's own: the client then has no receiver report)."""
    if isinstance(flow, RpcProc):
        flow.wait_server()
        try:
            client, server = (json.loads(p.read_text()) for p in (flow.out_path, flow.server_path))
        except (OSError, json.JSONDecodeError) as err:
            raise BackendError(f"flow {flow.index}: tevrpc JSON unreadable: {err}") from None
        return parse_tevrpc(client, server, flow.index)
    path = flow.out_path
    try:
        data = json.loads(path.read_text())
        if flow.interrupted:
            flow.wait_server()
            path = flow.server_path
            data = interrupted_report(data, json.loads(path.read_text()))
    except (OSError, json.JSONDecodeError) as err:
        raise BackendError(f"flow {flow.index}: iperf3 JSON {path.name} unreadable: {err}") from None
    return common.parse_iperf3(data, flow.index, flow.protocol)


def parse_tevrpc(client: dict, server: dict, index: int) -> dict:
    """An RPC flow's samples (the client's received bytes per interval; the server's
    window, RTT and retransmissions, matched by position) and its RPCs, in the shape
    common.parse_iperf3 gives a TCP flow, plus ``rpc``."""
    if client.get("tool") != "tevrpc" or server.get("tool") != "tevrpc":
        raise BackendError(f"flow {index}: not tevrpc's JSON")
    got, sent = client["intervals"], server["intervals"]
    n = len(got["t_s"])
    t_prev = [0.0, *got["t_s"][:-1]]

    def server_column(key: str, cumulative: bool = False) -> list:
        values = list(sent.get(key, []))[:n] + [None] * max(0, n - len(sent.get(key, [])))
        if not cumulative:
            return values
        return [None if v is None else v - (values[i - 1] or 0) if i else v for i, v in enumerate(values)]

    cols = {"t_s": [round(t, 6) for t in got["t_s"]], "bytes": list(got["bytes"]),
            "throughput_bps": [8.0 * b / (t - t0) if t > t0 else 0.0
                               for b, t, t0 in zip(got["bytes"], got["t_s"], t_prev)],
            "sent_bytes": server_column("bytes_acked", cumulative=True),
            "cwnd_bytes": server_column("cwnd_bytes"), "rtt_us": server_column("rtt_us"),
            "retransmits": server_column("total_retrans", cumulative=True)}
    span = got["t_s"][-1] if n else 0.0
    end = server.get("end", {})
    rtts = [v for v in sent.get("rtt_us", []) if v]
    summary = {
        "bytes": client["bytes_received"],
        "mean_throughput_bps": 8.0 * client["bytes_received"] / span if span else 0.0,
        "throughput_side": "receiver", "sent_bytes": server.get("bytes_sent"),
        "retransmits": end.get("total_retrans"), "min_rtt_us": end.get("min_rtt_us"),
        "mean_rtt_us": sum(rtts) / len(rtts) if rtts else None, "max_rtt_us": max(rtts, default=None),
        "max_cwnd_bytes": max((v for v in sent.get("cwnd_bytes", []) if v), default=None),
    }
    rpc = {"request_bytes": client["request_bytes"], "response_bytes": client["response_bytes"],
           "rpcs_per_s": client.get("rate_per_s"), "issued": client["issued"],
           "completed": client["completed"], "unfinished": client.get("unfinished", 0),
           "start_s": client["rpcs"]["start_s"], "latency_us": client["rpcs"]["latency_us"]}
    return {"samples": cols, "summary": summary, "samples_side": "receiver",
            "verified": server.get("cc_verified"), "receiver_cc": client.get("cc_verified"),
            "iperf3_version": None, "rpc": rpc, "ecn": end.get("ecn")}


def interrupted_report(client: dict, server: dict) -> dict:
    """A client's report of a test we interrupted, made whole from the server's: its
    "interrupt" error dropped (we asked for it), the server's intervals and receiver
    summary in place of the ones --get-server-output would have fetched, the summary's
    mean taken over the client's span."""
    if "interrupt" not in str(client.get("error", "")):
        return client  # another error: parse_iperf3 reports it
    out = {k: v for k, v in client.items() if k != "error"}
    out["server_output_json"] = {"intervals": server.get("intervals", [])}
    received = (server.get("end", {}).get("streams") or [{}])[0].get("receiver")
    end = dict(out.get("end", {}))
    streams = [dict(s) for s in end.get("streams") or [{}]]
    if received:
        # the server counts every byte it got but ends its summary's time at its last whole
        # interval; the client stopped later, mid-interval. Over the client's span: a
        # precision-stopped run at 0.2 ms (2026-12-07) had 44.0 s against 45.09, its mean
        # 2.5 % high (9.67 Gbit/s virtual on a link of 9.5 of payload)
        received = dict(received)
        span = max(float(received.get("seconds") or 0.0),
                   float((streams[0].get("sender") or {}).get("seconds") or 0.0))
        if span > 0 and received.get("bytes") is not None:
            received.update(seconds=span, end=span, bits_per_second=8.0 * received["bytes"] / span)
        streams[0]["receiver"] = received
    end["streams"] = streams
    out["end"] = end
    return out


def flow_procs(plan, handles: list, run_dir: Path, place: dict, receiver_env: dict,
               tevrpc: Path | None = None) -> list[FlowProc]:
    """One iperf3 (or tevrpc) pair per flow of the (physical) plan, not yet started."""
    procs = []
    for i, (flow, handle) in enumerate(zip(plan.flows, handles)):
        rpc = flow.protocol == "rpc"
        tool = RpcProc.tool if rpc else FlowProc.tool
        name = handle.kernel_name if handle else None
        receiver_cc = name if name in RECEIVE_SIDE else None
        env = dict(receiver_env or {}, **({"TEVRCV_CC": receiver_cc} if receiver_cc and not rpc else {}))
        common_args = dict(index=i, kernel_name=name,
                           protocol=flow.protocol, start_s=flow.start_s, stop_s=flow.stop_s,
                           duration_s=flow.end_s(plan.duration_s) - flow.start_s, interval_s=plan.interval_s,
                           rate_bps=flow.rate_bps, out_path=run_dir / f"{tool}-flow{i}.json",
                           err_path=run_dir / f"{tool}-flow{i}.log",
                           sender_cpu=place["sender_apps"][i], receiver_cpu=place["receiver_apps"][i],
                           receiver_env=env, receiver_cc=receiver_cc)
        procs.append(RpcProc(**common_args, request_bytes=flow.request_bytes, response_bytes=flow.response_bytes,
                             rpcs_per_s=flow.rpcs_per_s, tevrpc=tevrpc) if rpc else FlowProc(**common_args))
    return procs


def start_servers(topo: topology.Topology, flows: list[FlowProc], stack) -> None:
    """Every flow's server, listening; each flow stopped when ``stack`` closes."""
    for f in flows:
        stack.callback(f.stop)
        f.start_server(topo)
    wait_listening(topo, flows)


# Flows end within common.FINISH_GRACE_S after the duration, plus this many RTTs (more
# under loss: see drive)
FINISH_GRACE_RTTS = 120
SS_FIRST_LOOK_S = 0.5  # ss -ti after a flow's start: this long plus SS_SETUP_RTTS RTTs
SS_SETUP_RTTS = 6
SS_TRIES = 10


def drive(flows: list[FlowProc], topo: topology.Topology, delayer, t0: float, plan, log,
          midway=None, at_end=None, checkpoints_s: tuple = (), watch=None, doomed=None) -> float | None:
    """Start clients at their offsets; watch every process; stop when all are done.
    midway(mark), if given, runs once at half the run's duration and at each of
    checkpoints_s (mark: that time, in seconds after t0), at_end() once at its end (the clients, which started a little
    after t0, still send then). A precision watch (precision_watch.PrecisionWatch) or a
    doomed-attempt watch (doomed.DoomedWatch) may end the run early: every client is
    interrupted and at_end runs then. Returns when the run was stopped early (seconds
    after t0), else None."""
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
        # once doomed, the flows still due start at once: the record reads every flow's
        # report, not its schedule (doomed.py)
        while pending and stopped_at is None and (now >= t0 + pending[0].start_s or doomed and doomed.seen):
            f = pending.pop(0)
            f.start_client(topo)
            early = f", before its {f.start_s:.2f} s: the attempt is doomed" if now < t0 + f.start_s else ""
            log(f"flow {f.index} started ({f.kernel_name or 'udp'}{', rpc' if isinstance(f, RpcProc) else ''}) "
                f"at {now - t0:.2f} s{early}")
        for f in flows:
            check_socket_cc(f, topo, now, ss_first_look_s)
        if stopped_at is None and (watch and watch.due(now - t0) and watch.check(t0)
                                   or doomed and doomed.due(now - t0) and doomed.check(now - t0)):
            stopped_at = now - t0
            if doomed and doomed.ended_s is not None:   # not a precision stop while doomed waits
                log(f"attempt doomed at {doomed.at_s:.0f} s, ended at {stopped_at:.0f} s (it runs again): "
                    f"{doomed.finding}")
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
            precision = watch.progress() if watch and stopped_at is None else ""
            log(f"... {now - t0:.0f}/{plan.duration_s:g} s" + (f"; precision: {precision}" if precision else ""))
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
    socks = [s for s in cc.ss_algorithms(topo.ns(f"s{f.pair}"), PORT) if s["algorithm"]]
    algs = [s["algorithm"] for s in socks]
    if not f.default_cc_set and f.kernel_name not in algs and len(algs) < 2 and f.ss_tries < SS_TRIES:
        return  # the control socket (namespace default) alone: look again
    f.ss_algorithms = algs
    # the data socket carries the flow's algorithm (iperf3's control socket may not)
    own = [s["ecn"] for s in socks if s["algorithm"] == f.kernel_name] or [s["ecn"] for s in socks]
    f.ss_ecn = any(own) if own else None
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
                raise BackendError(f"flow {f.index}: {f.tool} {end} "
                                   f"{describe_exit(proc)}; "
                                   f"see {f.err_path.name if end == 'client' else f.server_path.name}")
    if not delayer.alive():
        raise BackendError("the delay line died during the run; see delayline.log")
