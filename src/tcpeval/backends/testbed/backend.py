"""The testbed backend: the paper's physical dumbbell, driven over SSH.

Senders and receivers are Linux hosts reached with OpenSSH; the drop module is the
NetFPGA card (or anything with its register map) programmed through its register tool;
the propagation delay is physical (the fibre rings patched in), so a run checks that the
RTT it is asked for is the one the path has, and measures it.

Order of a run (each step in run_dir/run.log):
  testbed description -> hosts reachable -> congestion control available on the senders
  -> paper host settings (recorded) -> drop module programmed (disabled) -> base RTT
  (ping) -> iperf3 servers -> drop module enabled -> clients at their offsets -> drop
  module disabled, counters read -> JSON fetched -> trace.json (atomic).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import time
from pathlib import Path

import yaml

from tcpeval import drop_model, trace
from tcpeval.backends import common, fidelity, record
from tcpeval.backends.base import BackendError, ConditionError, refuse_condition
from tcpeval.backends.testbed import registers
from tcpeval.backends.testbed.hosts import SshHost, remote_tmpdir

DEFAULT_DESCRIPTION = Path("config/testbed.yaml")
PORT = common.IPERF3_PORT


class TestbedConfigError(BackendError):
    """The testbed description is missing or invalid; the message names the field."""

    __test__ = False  # a name pytest would otherwise try to collect


def load_description(path: str | os.PathLike | None = None) -> dict:
    """Read and check config/testbed.yaml (or TCPEVAL_TESTBED, or ``path``)."""
    path = Path(path or os.environ.get("TCPEVAL_TESTBED") or DEFAULT_DESCRIPTION)
    if not path.exists():
        raise TestbedConfigError(
            f"no testbed description at {path}: copy config/testbed.example.yaml to "
            f"{DEFAULT_DESCRIPTION} and fill in your hosts (or set TCPEVAL_TESTBED)")
    try:
        desc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise TestbedConfigError(f"{path}: not valid YAML: {err}") from None
    problems = []
    for role in ("senders", "receivers"):
        hosts = desc.get(role)
        if not isinstance(hosts, list) or not hosts:
            problems.append(f"{role}: a list of hosts is required")
            continue
        for i, h in enumerate(hosts):
            for key in ("name", "ssh", "data_ip"):
                if not isinstance(h, dict) or not h.get(key):
                    problems.append(f"{role}[{i}].{key}: required")
    drop = desc.get("dropper")
    if not isinstance(drop, dict):
        problems.append("dropper: required (ssh, write, read, base)")
    else:
        for key in ("ssh", "write", "read"):
            if not drop.get(key):
                problems.append(f"dropper.{key}: required")
        for key, fields in (("write", ("{address", "{value")), ("read", ("{address",))):
            if drop.get(key) and not all(f in drop[key] for f in fields):
                problems.append(f"dropper.{key}: the template must contain {', '.join(f + '}' for f in fields)}")
    path_desc = desc.get("path")
    if not isinstance(path_desc, dict) or not isinstance(path_desc.get("rtt_ms"), (int, float)):
        problems.append("path.rtt_ms: required (the RTT of the fibre currently patched in, in ms)")
    if problems:
        raise TestbedConfigError(f"{path}: invalid testbed description:\n  " + "\n  ".join(problems))
    desc.setdefault("ssh_command", ["ssh"])
    desc.setdefault("ssh_options", [])
    desc.setdefault("cc_names", {"port": "{variant}316", "native": "{variant}"})
    desc["path"].setdefault("rtt_tolerance_ms", None)
    desc["_source"] = str(path)
    return desc


# The idle RTT: 100 pings 10 ms apart (1 s), the median taken. Paced, as the emulated
# backend's probes are: pings 0.2 s apart read each host's wake-up from idle, not the path
# (on a VM whose idle vCPU halts, 0.3-0.9 ms medians on a 0.01-ms path, 2026-11-28); 10 ms
# is above ping's floor for users other than root (2 ms).
PING_PACE = ["-n", "-c", "100", "-i", "0.01"]


def ping_command(address: str) -> list[str]:
    return ["ping", *PING_PACE, address]


def parse_ping(output: str) -> dict:
    """Per-probe RTTs from `ping` output (lines '... time=0.123 ms')."""
    times = [float(t) for t in re.findall(r"time=([0-9.]+) ms", output)]
    if not times:
        raise BackendError(f"ping measured no RTT:\n{output.strip()}")
    return {"count": len(times), "median_ms": statistics.median(times),
            "min_ms": min(times), "max_ms": max(times)}


class TestbedBackend:
    name = "testbed"
    __test__ = False  # a name pytest would otherwise try to collect

    def __init__(self, *, progress: bool = False, lock_timeout_s: float = common.LOCK_TIMEOUT_S,
                 description: str | os.PathLike | dict | None = None):
        self.progress = progress
        self._description = description

    def _desc(self) -> dict:
        if isinstance(self._description, dict):
            return self._description
        return load_description(self._description)

    def run(self, condition, run_dir, *, force: bool = False) -> dict:
        run_dir = Path(run_dir)
        record.refuse_overwrite(run_dir, force)
        desc = self._desc()
        with record.replacing(run_dir, force) as aside:
            return self._run_in(condition, run_dir, desc, aside)

    def _run_in(self, condition, run_dir: Path, desc: dict, aside: Path | None) -> dict:
        run_dir.mkdir(parents=True, exist_ok=True)
        log = common.RunLog(run_dir / "run.log", self.progress, common.display_path(run_dir))
        if aside:
            log(record.replacing_note(aside))
        try:
            rec = self._execute(condition, run_dir, desc, log)
            trace.write_trace(run_dir, rec)
            log(f"trace written: {run_dir / trace.TRACE_FILE} (fidelity {rec['fidelity']['verdict']})")
            return rec
        except BaseException as err:
            log(f"run failed: {type(err).__name__}: {err}")
            raise
        finally:
            log.close()

    # ------------------------------------------------------------------ a run
    def _check(self, condition, desc: dict) -> None:
        refuse_condition(condition.problems())  # what any run needs; then what this testbed has
        if condition.backend != "testbed":
            raise ConditionError(f"condition.backend is {condition.backend!r}, expected 'testbed'")
        if condition.stop is not None:
            raise ConditionError("condition.stop: precision-driven runs are the emulated backend's for now "
                                 "(its watch reads the receiver's socket during the run); give the testbed "
                                 "a duration_s")
        pairs = min(len(desc["senders"]), len(desc["receivers"]))
        if len(condition.flows) > pairs:
            raise ConditionError(f"condition.flows: {len(condition.flows)} flows, the testbed has "
                               f"{pairs} sender/receiver pairs ({desc['_source']})")
        patched = float(desc["path"]["rtt_ms"])
        tol = desc["path"]["rtt_tolerance_ms"] or fidelity.rtt_tolerance_ms(patched)
        if abs(condition.rtt_ms - patched) > tol:
            raise ConditionError(
                f"condition.rtt_ms = {condition.rtt_ms}: the testbed path is patched for {patched} ms "
                f"(path.rtt_ms in {desc['_source']}); re-patch the rings and update it, or run "
                "the conditions of this RTT first")
        if condition.sock_ops:
            raise ConditionError("condition.sock_ops: sock_ops programs are attached on the emulated backend "
                                 "only (attach yours on the testbed's senders yourself)")
        if condition.ecn_threshold_bytes or condition.ecn_queues:
            raise ConditionError("condition.ecn_threshold_bytes: ECN marking (and its queues) is the emulated "
                                 "backend's link engine; the testbed's bottleneck is the switch's own and its "
                                 "dropper drops only")
        if any(f.ecn is not None for f in condition.flows):
            raise ConditionError("condition.flows[].ecn: a flow's ECN setting is applied to the emulated "
                                 "backend's endpoints only (set net.ipv4.tcp_ecn on the testbed's hosts yourself)")
        for i, flow in enumerate(condition.flows):
            if flow.protocol == "rpc":
                raise ConditionError(f"condition.flows[{i}].protocol: RPC flows run on the emulated backend "
                                     "only (the testbed's hosts run iperf3, not tevrpc)")
            if flow.protocol == "tcp" and flow.impl not in desc["cc_names"]:
                raise ConditionError(f"condition.flows[{i}].impl: {flow.impl!r} is not set up on the testbed "
                                   f"(cc_names in {desc['_source']} has {', '.join(desc['cc_names'])}); "
                                   "register your own object on the senders and name it under cc_names")

    def _execute(self, condition, run_dir: Path, desc: dict, log) -> dict:
        started_at = common.now_iso()
        self._check(condition, desc)
        n = len(condition.flows)
        ssh = dict(ssh_command=desc["ssh_command"], options=desc["ssh_options"])
        senders = [SshHost(h["name"], h["ssh"], **ssh) for h in desc["senders"][:n]]
        receivers = [SshHost(h["name"], h["ssh"], **ssh) for h in desc["receivers"][:n]]
        nf = SshHost("dropper", desc["dropper"]["ssh"], **ssh)
        bus = registers.RegisterBus(nf, desc["dropper"]["write"], desc["dropper"]["read"],
                                    int(desc["dropper"].get("base", 0)))
        with contextlib.ExitStack() as stack:
            for h in [*senders, *receivers, nf]:
                stack.callback(h.close)
                h.check_reachable()
            log(f"hosts reachable: {', '.join(h.name for h in [*senders, *receivers, nf])}")
            kernels = self._kernels(senders, receivers)
            names = self._cc_names(condition, desc, senders)
            host_settings, offloads = self._settings(condition, desc, senders, receivers)
            threshold = registers.program(bus, condition.drop, condition.seed)
            stack.callback(registers.disable, bus)
            log(f"drop module programmed: p={condition.drop:g} threshold={threshold:#x} seed={condition.seed:#x}")
            if condition.background_loss:
                # the emulator's stand-in for the paper's ring; a testbed's path loses what it loses
                log(f"background loss {condition.background_loss:g} of the condition: not emulated here, the "
                    "path's own losses stand in (mechanisms.background_loss null)")
            probe = parse_ping(senders[0].run(ping_command(desc["receivers"][0]["data_ip"]), timeout=30).stdout)
            log(f"RTT {probe['median_ms']:.3f} ms (ping, median of {probe['count']})")
            tmpdirs = [remote_tmpdir(h) for h in [*senders, *receivers]]
            clients, actual, (seen, dropped) = self._traffic(condition, desc, senders, receivers, names,
                                                             tmpdirs, bus, stack, log)
            flows, iperf3_version = self._collect(condition, run_dir, senders, names, clients, actual)
            for h, d in zip([*senders, *receivers], tmpdirs):
                h.run(["rm", "-rf", d], check=False)
        verdict = fidelity.verdict(
            fidelity.Setting(drop=condition.drop, rtt_ms=condition.rtt_ms),
            fidelity.PathMeasurements(seen=seen, dropped=dropped, rtt_ms=probe["median_ms"]),
            flows=fidelity.FlowMeasurements(
                sender_defaults={h.name: host_settings[h.name].get(common.CC_SYSCTL) for h in senders}))
        return record.build(
            condition=condition, run_dir=run_dir, backend="testbed", started_at=started_at, verdict=verdict,
            environment=record.environment(
                kernel=kernels, tools={"iperf3": iperf3_version}, sysctls={"endpoints": host_settings},
                offloads=offloads, testbed={k: v for k, v in desc.items() if not k.startswith("_")}),
            mechanisms={"drop": "netfpga-registers", "delay": "physical path", "rate": "nic",
                        "drop_detail": {"threshold": threshold, "seed": condition.seed,
                                        "register_tool": desc["dropper"]["write"]},
                        # real links run in real time: the setting is ignored
                        "dilation": {"factor": 1, "setting": condition.dilation},
                        # the path's own losses are the testbed's background loss
                        "background_loss": None},
            flows=flows,
            measured={"base_rtt_ms": probe["min_ms"], "rtt_ms": probe["median_ms"], "rtt_probe": probe,
                      "drop": record.drop_measurement(seen, dropped),
                      "bottleneck_rate_bps": sum(f["summary"]["mean_throughput_bps"] for f in flows),
                      "host_capacity_bps": desc["path"].get("rate_bps")})

    @staticmethod
    def _cc_names(condition, desc: dict, senders) -> list[str | None]:
        """Each flow's algorithm as its sender names it; the senders must offer it."""
        names = []
        for flow, sender in zip(condition.flows, senders):
            if flow.protocol == "udp":
                names.append(None)
                continue
            name = desc["cc_names"][flow.impl].format(variant=flow.variant)
            available = sender.read_text(common.AVAILABLE_CC_PATH).split()
            if name not in available:
                raise BackendError(f"{sender.name}: congestion control {name!r} ({flow.impl} {flow.variant}) "
                                   f"is not available (has: {' '.join(available)}); load the module or "
                                   "register the port on the sender first")
            names.append(name)
        return names

    def _settings(self, condition, desc: dict, senders, receivers) -> tuple[dict, dict]:
        """The paper's host settings on every endpoint: (what each host has, its offloads)."""
        n = len(senders)
        settings = {**common.PAPER_SYSCTLS, **common.STACK_316, **(condition.stack or {})}
        host_settings = {}
        for h in [*senders, *receivers]:
            # -e: the 3.16-like knobs (RACK off, no SACK compression) do not exist on
            # the paper's own 3.16 hosts, which behave that way anyway; the record
            # shows what each host has
            h.run(["sysctl", "-e", "-q", "-w", *[f"{k}={v}" for k, v in settings.items()]])
            host_settings[h.name] = self._read_sysctls(h)
        offloads = {h["name"]: self._offloads(host, h.get("iface"))
                    for host, h in zip([*senders, *receivers], [*desc["senders"][:n], *desc["receivers"][:n]])}
        return host_settings, offloads

    def _traffic(self, condition, desc: dict, senders, receivers, names, tmpdirs, bus, stack, log):
        """Servers, the drop module enabled, clients at their offsets, all awaited, the
        drop module disabled: ([(flow, remote JSON, client)], {flow: [start, stop] in run
        seconds as this controller saw them}, the drop module's (seen, dropped))."""
        n = len(condition.flows)
        # Remote processes are bounded by `timeout`: an SSH session that dies does not
        # reliably take its remote command with it.
        limit = f"{condition.duration_s + 2 * common.FINISH_GRACE_S:g}"
        for i, r in enumerate(receivers):
            server = r.spawn(["timeout", limit, "iperf3", "-s", "-1", "-p", PORT + i,
                              *common.iperf3_server_args(condition.interval_s)])
            stack.callback(server.kill)
        self._wait_listening(receivers)
        bus.write(drop_model.REG_CONTROL, drop_model.CONTROL_ENABLE)
        t0 = time.monotonic()
        clients, actual = [], {}
        for i in sorted(range(n), key=lambda i: condition.flows[i].start_s):
            flow = condition.flows[i]
            while time.monotonic() < t0 + flow.start_s:
                time.sleep(0.01)
            out = f"{tmpdirs[i]}/iperf3-flow{i}.json"
            what = (["-u", "-b", f"{int(flow.rate_bps)}"] if flow.protocol == "udp" else ["-C", names[i]])
            clients.append((i, out, senders[i].spawn(
                ["timeout", limit, "iperf3", "-c", desc["receivers"][i]["data_ip"], "-p", PORT + i, "-J",
                 "--logfile", out, "-t", f"{flow.end_s(condition.duration_s) - flow.start_s:g}",
                 "-i", f"{condition.interval_s:g}", *what, "--get-server-output"])))
            actual[i] = [time.monotonic() - t0, None]
            log(f"flow {i} started ({names[i] or 'udp'}) at {actual[i][0]:.2f} s")
        self._await_clients(clients, actual, t0, condition.duration_s)
        registers.disable(bus)
        seen, dropped = registers.counters(bus)
        log(f"traffic done in {time.monotonic() - t0:.1f} s; drop module saw {seen}, dropped {dropped}")
        return clients, actual, (seen, dropped)

    @staticmethod
    def _await_clients(clients, actual: dict, t0: float, duration_s: float) -> None:
        deadline = t0 + duration_s + common.FINISH_GRACE_S
        while any(proc.poll() is None for _, _, proc in clients):
            for i, _, proc in clients:
                if actual[i][1] is None and proc.poll() is not None:
                    actual[i][1] = time.monotonic() - t0
            if time.monotonic() > deadline:
                for i, _, proc in clients:
                    if proc.poll() is None:
                        proc.kill()
                        raise BackendError(f"flow {i}: iperf3 did not finish within duration + "
                                           f"{common.FINISH_GRACE_S:g} s")
            time.sleep(0.05)
        for i, _, _proc in clients:
            if actual[i][1] is None:
                actual[i][1] = time.monotonic() - t0

    @staticmethod
    def _collect(condition, run_dir: Path, senders, names, clients, actual) -> tuple[list, str | None]:
        """Each client's JSON fetched into run_dir and parsed: (flow records, iperf3 version)."""
        flows, version = [], None
        for i, out, _ in sorted(clients, key=lambda c: c[0]):
            text = senders[i].read_text(out)
            (run_dir / f"iperf3-flow{i}.json").write_text(text)
            try:
                data = json.loads(text)
            except json.JSONDecodeError as err:
                raise BackendError(f"flow {i}: iperf3 JSON unreadable: {err}") from None
            flow = condition.flows[i]
            parsed = common.parse_iperf3(data, i, flow.protocol)
            if flow.protocol == "tcp":
                record.check_verified_cc(i, flow.variant, names[i], parsed["verified"])
            version = parsed["iperf3_version"]
            flows.append(record.flow_record(
                i, flow, impl=flow.impl, actual=tuple(actual[i]), parsed=parsed,
                cc={"requested": names[i] or "udp", "verified": parsed["verified"], "object_sha256": None,
                    "source_sha256": None, "hz": None, "receiver": parsed["receiver_cc"]},
                raw_files=[f"iperf3-flow{i}.json"]))
        return flows, version

    @staticmethod
    def _read_sysctls(host: SshHost) -> dict:
        names = common.RECORDED_SYSCTLS
        out = host.run(["sysctl", *names], check=False).stdout
        return dict(line.split(" = ", 1) for line in out.splitlines() if " = " in line)

    @staticmethod
    def _offloads(host: SshHost, iface: str | None) -> dict | None:
        if not iface:
            return None
        # The paper turned LRO and GRO off (Sec. IV); record every offload's state.
        host.run(["ethtool", "-K", iface, "gro", "off", "lro", "off"], check=False)
        out = host.run(["ethtool", "-k", iface], check=False).stdout
        return dict(line.strip().split(": ", 1) for line in out.splitlines()[1:] if ": " in line)

    @staticmethod
    def _kernels(senders, receivers) -> str:
        kernels = {h.name: h.run(["uname", "-r"]).stdout.strip() for h in [*senders, *receivers]}
        return ", ".join(f"{name}: {k}" for name, k in kernels.items())

    @staticmethod
    def _wait_listening(receivers, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        for i, r in enumerate(receivers):
            while not r.run(["ss", "-Hltn", f"sport = :{PORT + i}"], check=False).stdout.strip():
                if time.monotonic() > deadline:
                    raise BackendError(f"{r.name}: iperf3 server not listening after {timeout:g} s")
                time.sleep(0.1)
