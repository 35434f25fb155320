"""What every backend shares: the paper's host settings, provenance of a run, the run
log, and iperf3's JSON turned into the trace's columnar samples."""
from __future__ import annotations

import datetime as dt
import os
import sys
import time
from pathlib import Path

from tcpeval.backends.base import BackendError
from tcpeval.provenance import REPO_ROOT

IPERF3_PORT = 5201
# Flows end within this long after the run's duration (iperf3's report included).
FINISH_GRACE_S = 20.0
# How long a run waits for another experiment on the same host (emulated host lock).
LOCK_TIMEOUT_S = 900.0
CC_SYSCTL = "net.ipv4.tcp_congestion_control"  # a host's (namespace's) default algorithm
AVAILABLE_CC_PATH = "/proc/sys/net/ipv4/tcp_available_congestion_control"

RTO_MIN_SYSCTL = "net.ipv4.tcp_rto_min_us"  # per namespace, Linux >= 6.11
PORT_AS_ENV = "TCPEVAL_PORT_AS"


def port_as() -> str:
    """How the 3.16 ports are loaded: $TCPEVAL_PORT_AS, "struct_ops" (BPF, the default:
    any kernel with BTF) or "kmod" (a kernel module: kernels that load modules)."""
    value = os.environ.get(PORT_AS_ENV) or "struct_ops"
    if value not in ("struct_ops", "kmod"):
        raise BackendError(f"{PORT_AS_ENV}={value!r}: expected struct_ops or kmod")
    return value


# The paper's host settings (Sec. IV), applied on the endpoints (namespaces or hosts).
PAPER_SYSCTLS = {
    "net.ipv4.tcp_window_scaling": 1,
    "net.ipv4.tcp_timestamps": 0,
    "net.ipv4.tcp_sack": 1,
    "net.ipv4.tcp_rmem": "4096 131072 1073741824",   # max 1 GiB
    "net.ipv4.tcp_wmem": "4096 16384 1073741824",
    "net.ipv4.tcp_no_metrics_save": 1,
}
# Linux 3.16-like stack behaviour, overridable per condition (Condition.stack):
# no RACK loss detection (3.16 predates it), the 3.16 TSQ limit of 128 KB, no SACK
# compression (4.19 on: a receiver holds back up to 44 SACKs; 3.16 sent each one), no
# deferred ACKs while a socket's backlog is processed (6.8 on: one ACK for everything
# that queued while the reader held the socket; 3.16 ACKed every second segment), and
# no TCP-internal pacing: the default algorithm is the one a connection starts with
# before iperf3's -C switches it, and BBR's init marks the socket for pacing
# (sk_pacing_status), a mark the switch keeps. The algorithm under test would then send
# paced, 2 x cwnd/RTT in slow start, which 3.16 (without fq) never did; that alone fires
# 3.16 HyStart's ACK-train test at ~75 segments. Reno is always built in and never paces.
STACK_316 = {
    CC_SYSCTL: "reno",
    "net.ipv4.tcp_recovery": 0,
    "net.ipv4.tcp_limit_output_bytes": 131072,
    "net.ipv4.tcp_comp_sack_nr": 0,
    "net.ipv4.tcp_backlog_ack_defer": 0,
}
# Knobs of kernels newer than 3.16: where a kernel lacks one, it behaves as 3.16 did.
NEWER_KERNEL_KNOBS = frozenset({"net.ipv4.tcp_comp_sack_nr", "net.ipv4.tcp_backlog_ack_defer",
                                "net.ipv4.tcp_rto_min_us"})
RECORDED_SYSCTLS = sorted(set(PAPER_SYSCTLS) | set(STACK_316) | {
    CC_SYSCTL, "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control", "net.ipv4.tcp_ecn", "net.ipv4.tcp_frto",
    "net.ipv4.tcp_early_retrans", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_autocorking",
    "net.ipv4.tcp_moderate_rcvbuf", "net.ipv4.tcp_pacing_ss_ratio", "net.ipv4.tcp_pacing_ca_ratio",
    "net.ipv4.tcp_min_tso_segs", "net.ipv4.tcp_adv_win_scale", "net.ipv4.tcp_mtu_probing",
    "net.ipv4.tcp_comp_sack_nr", "net.ipv4.tcp_rto_min_us", "net.ipv4.tcp_thin_linear_timeouts", "net.ipv4.tcp_dsack",
    "net.ipv4.tcp_fack", "net.ipv4.tcp_reordering", "net.ipv4.tcp_shrink_window"})


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def tcpeval_version() -> str:
    try:
        from importlib.metadata import version
        return version("tcpeval")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0+unknown"


class RunLog:
    """run.log plus optional progress on stderr."""

    def __init__(self, path: Path, progress: bool, prefix: str):
        self.path, self.progress, self.prefix = path, progress, prefix
        self.handle = open(path, "w")
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.2f}s] {msg}"
        self.handle.write(line + "\n")
        self.handle.flush()
        if self.progress:
            print(f"{self.prefix}: {msg}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self.handle.close()


def display_path(run_dir: Path) -> str:
    run_dir = run_dir.resolve()
    try:
        return str(run_dir.relative_to(REPO_ROOT))
    except ValueError:
        return str(run_dir)


def iperf3_server_args(interval_s: float) -> list[str]:
    """Options every iperf3 server gets: JSON with the same interval as the client, so the
    client can fetch the receiver's per-interval bytes (``--get-server-output``)."""
    return ["-J", "-i", f"{interval_s:g}"]


def without_repeats(intervals: list[dict]) -> list[dict]:
    """An iperf3 server's intervals less any that repeats the one before it (the same start
    and end): a server whose client is interrupted, as a precision-driven run's stop does,
    reports its last interval twice (esnet/iperf#479), and matched by position to the
    client's intervals the repeat would stand for the client's partial last one and add a
    whole interval's bytes (+0.2-2.4 % to the means of the runs that stopped early, until
    2026-12-02; trace format version 4)."""
    out: list[dict] = []
    for interval in intervals:
        if out and (interval.get("start"), interval.get("end")) == (out[-1].get("start"), out[-1].get("end")):
            continue
        out.append(interval)
    return out


# The client's per-interval bytes are what the application wrote into its socket; with a
# send buffer of up to 1 GiB they run ahead of the link (by a quarter of the mean in a
# 20-s run; docs/fidelity.md). Throughput is therefore taken at the receiver.
def parse_iperf3(data: dict, index: int, protocol: str = "tcp") -> dict:
    """Columnar samples and a summary from an iperf3 client's JSON (``-J``).

    bytes/throughput_bps are what the receiver got per interval (the server's intervals
    from ``--get-server-output``, matched to the client's by position); cwnd, RTT and
    retransmits are the sender's socket, from the client's intervals; sent_bytes is
    what the sender's application wrote. Without server output (an older trace, a server
    started without -J) the client's bytes are used and ``throughput_side`` says so."""
    if "error" in data:
        raise BackendError(f"flow {index}: iperf3 reported: {data['error']}")
    server = data.get("server_output_json") or {}
    received = without_repeats([iv["streams"][0] for iv in server.get("intervals", [])])
    side = "receiver" if received else "sender"
    cols = {k: [] for k in ("t_s", "bytes", "throughput_bps", "sent_bytes", "cwnd_bytes", "rtt_us",
                            "retransmits")}
    for i, interval in enumerate(data.get("intervals", [])):
        s = interval["streams"][0]
        t = round(float(s["end"]), 6)
        if cols["t_s"] and t <= cols["t_s"][-1]:
            continue  # iperf3 occasionally repeats an end time; keep time strictly increasing
        if received and i >= len(received):
            break     # the receiver stopped reporting first
        r = received[i] if received else s
        cols["t_s"].append(t)
        cols["bytes"].append(r["bytes"])
        cols["throughput_bps"].append(r["bits_per_second"])
        cols["sent_bytes"].append(s["bytes"])
        cols["cwnd_bytes"].append(s.get("snd_cwnd"))
        cols["rtt_us"].append(s.get("rtt"))
        cols["retransmits"].append(s.get("retransmits"))
    end = data.get("end", {})
    streams = end.get("streams") or [{}]
    sender = streams[0].get("sender") or streams[0].get("udp") or {}
    receiver = streams[0].get("receiver") or {}
    got = receiver if receiver.get("bytes") is not None and protocol == "tcp" else sender
    summary = {
        "bytes": got.get("bytes", sum(cols["bytes"])),
        "mean_throughput_bps": got.get("bits_per_second", 0.0),
        "throughput_side": "receiver" if got is receiver else "sender",
        "sent_bytes": sender.get("bytes"),
        "retransmits": sender.get("retransmits"),
        "min_rtt_us": sender.get("min_rtt"), "mean_rtt_us": sender.get("mean_rtt"),
        "max_rtt_us": sender.get("max_rtt"), "max_cwnd_bytes": sender.get("max_snd_cwnd"),
    }
    if protocol == "udp":
        summary["lost_packets"] = sender.get("lost_packets")
    return {"samples": cols, "summary": summary, "samples_side": side,
            "verified": end.get("sender_tcp_congestion"),
            "receiver_cc": end.get("receiver_tcp_congestion"),
            "iperf3_version": data.get("start", {}).get("version")}
