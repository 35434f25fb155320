"""The paper's dumbbell (Fig. 1/2) in network namespaces on one host.

Mapping (``tev<id>-<role>`` namespaces):

    paper                               here
    sender 1/2, receiver 1/2            namespaces s1, s2, r1, r2 (one veth each)
    switch A + NetFPGA + ring + switch B  namespace sw:
        switch A (combines the flows)   L2 forwarding by a BPF program at the tc ingress
                                        of ports tev<id>-s1/-s2 (bpf_redirect to the
                                        bottleneck's egress; IPv4 forwarding as fallback)
        bottleneck link + its buffer    bridge tev<id>-br, egress qdisc (TBF/HTB: rate, buffer)
        NetFPGA drop module             BPF tc program at the ingress of each receiver's link
                                        (after the queue, as the card sat behind switch A's
                                        buffer; one program and register map for all links)
        ring (propagation delay)        netem on the ACK path (ports -s1/-s2 egress), or the
                                        tevdelay line on the ACK path (taps on ports -r1/-r2)
        switch B (separates the flows)  the bridge's ports tev<id>-r1/-r2

The two switches and the bottleneck collapse into one namespace because every extra
namespace hop costs a forwarding pass of every packet on a 2-core host
(docs/fidelity.md). Both flows share the single bottleneck queue, as in the paper.
All ARP/FDB state is static so no flooding or resolution happens during a run.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from tcpeval.backends import common
from tcpeval.backends.emulated import host
from tcpeval.condition import HEADER_BYTES, MSS_BYTES

OFFLOADS = ("tso", "gso", "gro", "lro")
# A full-sized frame on the wire (the 1500-byte MTU plus the Ethernet header): the
# paper's segment (tcp_timestamps = 0) and its headers.
WIRE_FRAME_BYTES = MSS_BYTES + HEADER_BYTES
# TSO frames at the senders. The paper's senders and bottleneck ran at the same 10 Gb/s,
# so a TSO burst left the NIC at the bottleneck's rate and queued nowhere. Here the
# sender's veth is infinitely fast and a whole frame lands in the bottleneck queue at once.
# The kernel sizes frames to ~1 ms of the *physical* rate (up to 44 segments): at a low
# rate that is up to 1.8 ms of queueing per frame, and under time dilation k times less in
# virtual time -- a k-dependent artefact (issue 11's cross-validation: Reno at 1e-4 ran 6 %
# faster dilated than at k = 1, its RTT under load 0.3 ms longer at k = 1). So a frame may
# hold at most SENDER_BURST_S of the *virtual* bottleneck, the same number of segments at
# every k, and at least the pair one ACK releases anyway.
SENDER_BURST_S = 10e-6
SENDER_GSO_SEGS = (2, 44)  # 44: what a 64 KB frame holds


def sender_gso_max_segs(virtual_rate_bps: float, wire_frame_bytes: int = WIRE_FRAME_BYTES) -> int:
    """Segments per sender TSO frame on a bottleneck of this virtual rate."""
    segs = int(virtual_rate_bps * SENDER_BURST_S / (8 * wire_frame_bytes))
    return max(SENDER_GSO_SEGS[0], min(SENDER_GSO_SEGS[1], segs))


SENDER_NET = "10.77.{i}.0/24"
RECEIVER_GW = "10.77.100.1"


def sender_ip(i: int) -> str:
    return f"10.77.{i}.2"


def sender_gw(i: int) -> str:
    return f"10.77.{i}.1"


def receiver_ip(i: int) -> str:
    return f"10.77.100.{10 + i}"


@dataclass
class Topology:
    run_id: str
    pairs: int  # sender/receiver pairs (1 to host.MAX_PAIRS)
    created: list[str] = field(default_factory=list)
    macs: dict = field(default_factory=dict)  # (ns, dev) -> mac
    # endpoint role -> the minimum RTO (ms) set on its default route, where the kernel
    # lacked the sysctl (set_stack)
    route_rto_min_ms: dict = field(default_factory=dict)

    # names ------------------------------------------------------------------
    def ns(self, role: str) -> str:
        return host.ns_name(self.run_id, role)

    @property
    def sw(self) -> str:
        return self.ns("sw")

    def dev(self, role: str) -> str:
        """Device names: switch ports tev<id>-s1..., the bridge tev<id>-br, and each
        endpoint's single interface tev<id>-ep."""
        return f"{host.PREFIX}{self.run_id}-{role}"

    @property
    def bridged(self) -> bool:
        # One pair: the receiver port itself is the bottleneck (no bridge pass per packet).
        return self.pairs > 1

    @property
    def bottleneck_dev(self) -> str:
        return self.dev("br") if self.bridged else self.dev("r1")

    def namespaces(self) -> list[str]:
        roles = ["sw"] + [f"{k}{i}" for i in range(1, self.pairs + 1) for k in ("s", "r")]
        return [self.ns(r) for r in roles]

    def ack_ports(self) -> list[str]:
        """Switch-side ports where ACKs (receiver -> sender) enter the switch."""
        return [self.dev(f"r{i}") for i in range(1, self.pairs + 1)]

    def drop_stage_links(self) -> list[tuple[str, str]]:
        """(namespace, device) where the drop stage sees the data: each receiver's
        interface, after the bottleneck queue, where every frame is a wire packet."""
        return [(self.ns(f"r{i}"), self.dev("ep")) for i in range(1, self.pairs + 1)]

    def sender_ports(self) -> list[str]:
        return [self.dev(f"s{i}") for i in range(1, self.pairs + 1)]

    def set_receive_window(self, rwin: dict) -> None:
        """The receivers' buffer settings of receive_window(...) (before any flow connects);
        the clamp itself is the servers' (receiver_env)."""
        for i in range(1, self.pairs + 1):
            sysctl(self.ns(f"r{i}"), rwin["sysctls"], strict=True)
            sysctl(self.ns(f"r{i}"), rwin.get("sysctls_if_present", {}), strict=False)

    # build ------------------------------------------------------------------
    def create(self) -> None:
        sw, ep, br = self.sw, self.dev("ep"), self.bottleneck_dev
        for ns in self.namespaces():
            host.run(["ip", "netns", "add", ns])
            self.created.append(ns)
        cmds = ["link set lo up"]
        if self.bridged:
            cmds += [f"link add {br} type bridge stp_state 0 mcast_snooping 0 ageing_time 0",
                     f"link set {br} up", f"addr add {RECEIVER_GW}/24 dev {br}"]
        for i in range(1, self.pairs + 1):
            s, r = self.dev(f"s{i}"), self.dev(f"r{i}")
            cmds += [
                f"link add {s} type veth peer name {ep} netns {self.ns(f's{i}')}",
                f"addr add {sender_gw(i)}/24 dev {s}", f"link set {s} up",
                f"link add {r} type veth peer name {ep} netns {self.ns(f'r{i}')}",
                f"link set {r} master {br}" if self.bridged else f"addr add {RECEIVER_GW}/24 dev {r}",
                f"link set {r} up",
            ]
        host.run(["ip", "-n", sw, "-batch", "-"], input="\n".join(cmds) + "\n")
        for i in range(1, self.pairs + 1):
            for role, addr, gw in ((f"s{i}", sender_ip(i), sender_gw(i)),
                                   (f"r{i}", receiver_ip(i), RECEIVER_GW)):
                host.run(["ip", "-n", self.ns(role), "-batch", "-"], input="\n".join([
                    "link set lo up", f"addr add {addr}/24 dev {ep}", f"link set {ep} up",
                    f"route add default via {gw} dev {ep}"]) + "\n")
        self._read_macs()
        self._static_l2()

        sysctl(sw, {"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                    "net.ipv4.conf.default.rp_filter": 0}, strict=True)
        # bridge -> iptables hooks cost a pass per packet; off where the kernel has them
        sysctl(sw, {"net.bridge.bridge-nf-call-iptables": 0,
                    "net.bridge.bridge-nf-call-arptables": 0}, strict=False)
        self.offloads_off()

    def _read_macs(self) -> None:
        for ns in self.namespaces():
            out = host.run(["ip", "-n", ns, "-j", "link", "show"]).stdout
            for link in json.loads(out):
                self.macs[(ns, link["ifname"])] = link.get("address")

    def mac(self, role_ns: str, dev: str) -> str:
        return self.macs[(self.ns(role_ns), dev)]

    def _static_l2(self) -> None:
        sw, ep = self.sw, self.dev("ep")
        sw_cmds = []
        for i in range(1, self.pairs + 1):
            s_mac = self.mac(f"s{i}", ep)
            r_mac = self.mac(f"r{i}", ep)
            sw_cmds.append(f"neigh replace {sender_ip(i)} lladdr {s_mac} dev {self.dev(f's{i}')} nud permanent")
            sw_cmds.append(f"neigh replace {receiver_ip(i)} lladdr {r_mac} dev {self.bottleneck_dev} nud permanent")
            host.run(["ip", "-n", self.ns(f"s{i}"), "neigh", "replace", sender_gw(i), "lladdr",
                      self.mac("sw", self.dev(f"s{i}")), "dev", ep, "nud", "permanent"])
            host.run(["ip", "-n", self.ns(f"r{i}"), "neigh", "replace", RECEIVER_GW, "lladdr",
                      self.mac("sw", self.bottleneck_dev), "dev", ep, "nud", "permanent"])
            if self.bridged:
                host.run(["bridge", "-n", sw, "fdb", "replace", r_mac, "dev", self.dev(f"r{i}"),
                          "master", "static"])
        host.run(["ip", "-n", sw, "-batch", "-"], input="\n".join(sw_cmds) + "\n")

    def devices(self) -> list[tuple[str, str]]:
        out = [(self.sw, self.bottleneck_dev)] if self.bridged else []
        for i in range(1, self.pairs + 1):
            out += [(self.sw, self.dev(f"s{i}")), (self.sw, self.dev(f"r{i}")),
                    (self.ns(f"s{i}"), self.dev("ep")), (self.ns(f"r{i}"), self.dev("ep"))]
        return out

    def fast_path(self, art) -> dict:
        """The switch's forwarding as L2 redirects (tev_l2fwd at the ports' tc ingress):
        data from sender port i -> the bottleneck device's egress (dropper, then TBF),
        ACKs from receiver port i -> sender port i's egress. Saves the routing pass of
        every packet; the bottleneck's hook order (drop stage, then queue) is unchanged.
        Where the delay line steals the ACKs at the receiver ports' ingress (priority
        1), their forwarding entry is never reached."""
        sw, ep = self.sw, self.dev("ep")
        data_routes = [f"{receiver_ip(i)}={self.bottleneck_dev},{self.mac(f'r{i}', ep)},"
                       f"{self.mac('sw', self.bottleneck_dev)}" for i in range(1, self.pairs + 1)]
        ack_routes = [f"{sender_ip(i)}={self.dev(f's{i}')},{self.mac(f's{i}', ep)},"
                      f"{self.mac('sw', self.dev(f's{i}'))}" for i in range(1, self.pairs + 1)]
        for port in self.sender_ports():
            host.run([art.tevbpf, "fwd", art.datapath_obj, port, *data_routes], ns=sw)
        for port in self.ack_ports():
            host.run([art.tevbpf, "fwd", art.datapath_obj, port, *ack_routes], ns=sw)
        # L2 forwarding at the ports' tc ingress; the forwarded clone belongs to no socket
        # (TCP small queues end at the switch, as at a sender's NIC); IPv4 forwarding for
        # the rest (unknown destinations, non-IPv4).
        return {"mechanism": "bpf-tc-clone-redirect", "program": "tev_l2fwd",
                "data_path": f"{' '.join(self.sender_ports())} ingress -> {self.bottleneck_dev} egress"
                             + (" -> bridge -> receiver ports" if self.bridged else "")}

    def placement(self, engine: bool = False) -> dict:
        """CPUs for each part of the path, or None (no steering) with one CPU.

        senders/receivers: RPS of the endpoints' veths (where a frame's receive
        processing -- and, for a sender, the data its ACKs clock out -- runs); switch:
        RPS of the switch's sender ports; line: the delay line; *_apps: iperf3 -A (the
        copies from/to user space). The delay line must share its CPU with no network
        softirq: softirq runs before any task, RT or not, and beside the receivers' (or,
        less so, the senders') softirq the line released many ACKs late; alone with
        user-space work, almost none (docs/fidelity.md).
          2 CPUs: all softirq on CPU 0; the line and both iperf3 ends (process context,
                  preemptible: the receivers' copies to user space, the senders' sendfile
                  writes) on CPU 1. With the senders on CPU 0 they starved there (the flow
                  went app-limited); on CPU 1 a flow carried more, with no more late ACKs.
          3 CPUs: senders 0, receivers 1, line 2.
          4+ CPUs: per pair a sender and a receiver CPU, the last CPU for the line.
          link engine (it spins on the line's CPU, tevdelay.c), 2 CPUs: the iperf3 ends
                  move to CPU 0 (a spinning engine leaves them no time on CPU 1); the
                  receivers' packets are processed on CPU 1, inside the engine's own sends
                  (no inter-processor interrupt per packet, which costs many microseconds
                  in a VM), and the switch's ACK ports get no steering: each ACK is tapped
                  on the CPU that sent it. Balanced so, the host carried 1.3-1.4 Gbps at
                  0.2 ms; with the receivers on CPU 0 that CPU saturated at 1.0-1.1.
        ack_ports: RPS of the switch's ports from the receivers (default: the switch's).
        TCPEVAL_PLACEMENT="s,r,switch,line,s_app,r_app[,ack_ports]" overrides (benchmarks;
        "-" for no steering)."""
        ncpu = os.cpu_count() or 1
        n = self.pairs
        if os.environ.get("TCPEVAL_PLACEMENT"):
            v = [None if x in ("", "-") else int(x) for x in os.environ["TCPEVAL_PLACEMENT"].split(",")]
            return {"senders": [v[0]] * n, "receivers": [v[1]] * n, "switch": v[2], "line": v[3],
                    "sender_apps": [v[4]] * n, "receiver_apps": [v[5]] * n,
                    "ack_ports": v[6] if len(v) > 6 else v[2], "source": "TCPEVAL_PLACEMENT"}
        if ncpu < 2:
            return {"senders": [None] * n, "receivers": [None] * n, "switch": None, "line": None,
                    "sender_apps": [None] * n, "receiver_apps": [None] * n, "source": "1 CPU"}
        if ncpu == 2 and engine:
            return {"senders": [0] * n, "receivers": [1] * n, "switch": 0, "line": 1,
                    "sender_apps": [0] * n, "receiver_apps": [0] * n, "ack_ports": None,
                    "source": "2 CPUs, link engine"}
        if ncpu == 2:
            return {"senders": [0] * n, "receivers": [0] * n, "switch": 0, "line": 1,
                    "sender_apps": [1] * n, "receiver_apps": [1] * n, "source": "2 CPUs"}
        pool = list(range(ncpu - 1))  # the last CPU is the line's alone
        senders = [pool[(2 * i) % len(pool)] for i in range(n)]
        receivers = [pool[(2 * i + 1) % len(pool)] for i in range(n)]
        return {"senders": senders, "receivers": receivers, "switch": None, "line": ncpu - 1,
                "sender_apps": senders, "receiver_apps": receivers, "source": f"{ncpu} CPUs"}

    def apply_placement(self, place: dict) -> dict:
        """Write the RPS masks (inside the run's namespaces only); returns them."""
        masks = {}
        targets = []
        for i in range(1, self.pairs + 1):
            targets += [(self.ns(f"s{i}"), self.dev("ep"), place["senders"][i - 1]),
                        (self.ns(f"r{i}"), self.dev("ep"), place["receivers"][i - 1])]
        # The receivers' ACKs leave from whichever CPU ran their socket (softirq, or the
        # reader's process context); steering each ACK port to one CPU keeps them in the
        # order they were sent (two backlogs would race and reorder them at the taps).
        targets += [(self.sw, port, place["switch"]) for port in self.sender_ports()]
        targets += [(self.sw, port, place.get("ack_ports", place["switch"])) for port in self.ack_ports()]
        for ns, dev, cpu in targets:
            if cpu is None:
                continue
            mask = format(1 << cpu, "x")
            host.run(["sh", "-c", f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"], ns=ns)
            masks[f"{ns.split('-', 1)[1]}:{dev}"] = mask
        return masks

    def offloads_off(self) -> None:
        """Wire-sized packets wherever a packet is judged: one drop decision per packet.
        The senders keep TSO (the paper's NICs segmented in hardware; frame size:
        cap_sender_frames): their frames cross into the switch whole and are split into wire
        packets when they enter the bottleneck queue (TBF with a one-frame peak bucket) or
        leave a switch port (TSO/GSO off there), before the drop stage on the receivers'
        links. GRO/LRO are off everywhere (as in the paper). Receivers also compute TCP
        checksums in software, because the delay line re-injects their ACKs as fresh
        frames (a CHECKSUM_PARTIAL ACK would arrive with an unfinished checksum)."""
        senders = {(self.ns(f"s{i}"), self.dev("ep")) for i in range(1, self.pairs + 1)}
        for ns, dev in self.devices():
            args = ["ethtool", "-K", dev]
            for feature in OFFLOADS:
                on = feature in ("tso", "gso") and (ns, dev) in senders
                args += [feature, "on" if on else "off"]
            host.run(args, ns=ns, check=False)  # lro is "fixed" on veth: ethtool says so, harmless
        for i in range(1, self.pairs + 1):
            host.run(["ethtool", "-K", self.dev("ep"), "tx", "off"], ns=self.ns(f"r{i}"), check=False)

    def cap_sender_frames(self, segments: int) -> None:
        """At most this many segments per TSO frame (sender_gso_max_segs); before any
        connection, which takes the device's limit when it is set up."""
        for i in range(1, self.pairs + 1):
            host.run(["ip", "link", "set", "dev", self.dev("ep"), "gso_max_segs", str(segments)],
                     ns=self.ns(f"s{i}"))

    def offload_states(self) -> dict:
        """ethtool -k of every device on the path, for the trace."""
        out = {}
        for ns, dev in self.devices():
            proc = host.run(["ethtool", "-k", dev], ns=ns, check=False)
            feats = {}
            for line in proc.stdout.splitlines()[1:]:
                if ":" in line and not line.startswith("\t\t"):
                    k, v = line.split(":", 1)
                    k = k.strip()
                    if k in ("tcp-segmentation-offload", "generic-segmentation-offload",
                             "generic-receive-offload", "large-receive-offload",
                             "tx-checksumming", "rx-checksumming", "scatter-gather"):
                        feats[k] = v.split()[0] if v.split() else ""
            link = json.loads(host.run(["ip", "-details", "-json", "link", "show", "dev", dev], ns=ns).stdout)
            feats["gso_max_segs"] = link[0].get("gso_max_segs")
            out[f"{ns.split('-', 1)[1]}:{dev}"] = feats
        return out

    def destroy(self) -> None:
        for ns in reversed(self.created):
            host.remove_netns(ns)
        self.created.clear()


# Receivers' window. 3.16 receivers ACK a pair of segments at once only while the right
# edge of the advertised window moves (__tcp_ack_snd_check); once the reading application
# lags, free receive space falls below the window and they ACK when the reader frees
# space instead -- stretch ACKs. The paper's dedicated receivers kept up; ours share a CPU.
# So the window is clamped (TCP_WINDOW_CLAMP, set by receiver/tevrcv.c preloaded into
# iperf3: the kernel resets any clamp set before the first data) well above anything the
# path needs, and the buffer (autotuning off) is several times the clamp, so a lagging
# reader eats into the spare room, not into the window.
RECEIVE_WINDOW_FACTOR = 2   # window clamp = 2 x (BDP + bottleneck buffer)
RECEIVE_BUFFER_FACTOR = 4   # receive buffer = 4 x the clamp
RECEIVE_WINDOW_MIN = 1 << 20
# Under random loss p no flow holds a window of k / p segments: a window of that size
# passes a round trip without a loss with probability e^-k, and slow start reaches it only
# after about twice that many segments without one (e^-2k). A skipped hook of a port
# (docs/fidelity.md, the PVM fault) lets the stack send what the receive window allows, so
# on a lossy long path the path's clamp (120 MB at 24.2 ms) turns one skip into a burst
# larger than the flow's whole run; clamped to k / p segments the same skip costs k / p.
# k = 5: e^-5 = 0.7 % per round trip, e^-10 for slow start; the verdict flags a run whose
# flight the clamp held (fidelity.receive_window_check: a window of twice the clamp).
LOSS_BOUND_LOSSES_PER_WINDOW = 5
LOSS_BOUND_MIN = 64 * 1024
_RMEM_MIN, _, _RMEM_MAX = common.PAPER_SYSCTLS["net.ipv4.tcp_rmem"].split()
RECEIVE_BUFFER_MAX = int(_RMEM_MAX)  # the paper's hosts' tcp_rmem maximum
UNSHAPED_RATE_BPS = 10e9      # no bottleneck (calibration): size for the paper's 10G
READER_WAKEUP_BYTES = 64 * 1024  # SO_RCVLOWAT of the receivers' bulk sockets


def loss_bound_bytes(loss_rate: float) -> int | None:
    """The window no flow holds under random loss at ``loss_rate`` (None without loss)."""
    if loss_rate <= 0:
        return None
    return max(LOSS_BOUND_MIN, int(LOSS_BOUND_LOSSES_PER_WINDOW / loss_rate) * MSS_BYTES)


def receive_window(rate_bps: float | None, rtt_ms: float, buffer_bytes: int,
                   loss_rate: float = 0.0) -> dict:
    """The receivers' window clamp and buffer for a path (bytes): a multiple of the path's
    BDP + buffer, and under loss at most what no flow holds (loss_bound_bytes)."""
    bdp = (rate_bps or UNSHAPED_RATE_BPS) * rtt_ms / 1e3 / 8
    window = max(RECEIVE_WINDOW_MIN, int(RECEIVE_WINDOW_FACTOR * (bdp + buffer_bytes)))
    bound, bound_by = loss_bound_bytes(loss_rate), "path"
    if bound is not None and bound < window:
        window, bound_by = bound, "loss"
    buffer = min(RECEIVE_BUFFER_MAX, RECEIVE_BUFFER_FACTOR * window)
    window = min(window, buffer // RECEIVE_BUFFER_FACTOR)
    return {"window_clamp_bytes": window, "buffer_bytes": buffer, "bound_by": bound_by,
            # the reader is woken per this many bytes, not per segment (receiver/tevrcv.c):
            # at 1.5 Gbps that cut the host's reschedule interrupts from ~60,000 to ~4,000
            # per run, and the ACKs never wait for the reader (the clamp above)
            "reader_wakeup_bytes": READER_WAKEUP_BYTES,
            "sysctls": {"net.ipv4.tcp_moderate_rcvbuf": 0,
                        "net.ipv4.tcp_rmem": f"{_RMEM_MIN} {buffer} {RECEIVE_BUFFER_MAX}"},
            # The kernel sets the clamp to the whole buffer at the first data segment
            # (tcp_measure_rcv_mss, 6.x), so the first ACK offers that window before the
            # server's first read clamps it again. A window may not shrink by default, and
            # it is rounded up to the window-scale unit (16 KB at wscale 14, for windows of
            # 100s of MB): an ACK every two segments (2.9 KB) never lowers it, so the clamped
            # window never looks like an advance and only the reader's wakeups send ACKs
            # (2.9 segments per ACK at 24.2 ms, x32). Letting it shrink once (Linux >= 6.5)
            # fixes that; older kernels lack both the knob and the reset.
            # How and why (TCP_WINDOW_CLAMP via libtevrcv.so, autotuning off): docs/trace-format.md.
            "sysctls_if_present": {"net.ipv4.tcp_shrink_window": 1}}


def receiver_env(rwin: dict, preload: Path) -> dict:
    return {"LD_PRELOAD": str(preload), "TEVRCV_WINDOW_CLAMP": rwin["window_clamp_bytes"],
            "TEVRCV_RCVLOWAT": rwin["reader_wakeup_bytes"]}


def sysctl(ns: str, values: dict, *, strict: bool) -> dict:
    """Set sysctls inside ``ns`` (never the host) in one shell; returns what was set.
    Unknown names are errors only when ``strict``."""
    texts, lines = {}, []
    for name, value in values.items():
        text = " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        texts[name] = text
        path = "/proc/sys/" + name.replace(".", "/")
        lines.append(f"echo '{text}' > {path} 2>/dev/null || echo 'FAILED {name}'")
    out = host.run(["sh", "-c", "\n".join(lines)], ns=ns, check=False).stdout
    failed = {line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")}
    if failed and strict:
        raise host.BackendError(f"sysctl failed in {ns}: {', '.join(sorted(failed))}")
    return {k: v for k, v in texts.items() if k not in failed}


def set_stack(topo: Topology, stack: dict, flow_stacks: list | None = None) -> None:
    """The endpoints' sysctls (every namespace but the switch's): each one must take,
    but the knobs of kernels newer than 3.16 (common.NEWER_KERNEL_KNOBS), without which
    a kernel behaves as 3.16 did. A minimum RTO the kernel has no sysctl for (before
    6.11) goes on the endpoint's default route instead (``rto_min``, which the stack
    reads per connection since long before 3.16). ``flow_stacks``: per flow, what its
    pair's two endpoints set over ``stack``."""
    newer = {k: v for k, v in stack.items() if k in common.NEWER_KERNEL_KNOBS}
    for role in _endpoint_roles(topo):
        ns = topo.ns(role)
        own = (flow_stacks or [])[int(role[1:]) - 1] if flow_stacks else {}
        sysctl(ns, {**{k: v for k, v in stack.items() if k not in newer}, **own}, strict=True)
        taken = sysctl(ns, newer, strict=False)
        if common.RTO_MIN_SYSCTL in newer and common.RTO_MIN_SYSCTL not in taken:
            ms = int(newer[common.RTO_MIN_SYSCTL]) / 1000
            route = host.run(["ip", "-n", ns, "route", "show", "default"], check=False).stdout.strip()
            if route:
                host.run(["ip", "-n", ns, "route", "change", *route.split(), "rto_min", f"{ms:g}ms"])
                topo.route_rto_min_ms[role] = ms


def _endpoint_roles(topo: Topology) -> list[str]:
    return [f"{side}{i}" for i in range(1, topo.pairs + 1) for side in ("s", "r")]


def read_sysctls(ns: str, names: list[str]) -> dict:
    script = "; ".join(f"printf '%s\\t' {n}; cat /proc/sys/{n.replace('.', '/')} 2>/dev/null || echo" for n in names)
    out = host.run(["sh", "-c", script], ns=ns, check=False).stdout
    res = {}
    for line in out.splitlines():
        if "\t" in line:
            k, v = line.split("\t", 1)
            v = " ".join(v.split())
            res[k] = None if v == "" else (int(v) if v.lstrip("-").isdigit() else v)
    return res


def read_sysctls_host(names: list[str]) -> dict:
    """Read (never write) host-global sysctls for the record."""
    out = {}
    for name in names:
        try:
            v = " ".join(open("/proc/sys/" + name.replace(".", "/")).read().split())
        except OSError:
            v = None
        out[name] = int(v) if v and v.lstrip("-").isdigit() else v
    return out
