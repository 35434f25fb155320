"""The testbed backend's hosts, on one machine: real OpenSSH servers in network namespaces
(tests/ssh_lab.py), plus a routed data path with the BPF drop module."""
import pytest

from ssh_lab import SshLab, running_ssh_lab, sh


@pytest.fixture
def ssh_lab(tmp_path):
    with running_ssh_lab(tmp_path, ["s1", "r1", "nf"]) as lab:
        yield lab


class DataPath:
    """The 10G test network of the lab: s1 -- nf -- r1, routed through the `nf` host,
    whose egress toward r1 carries the BPF drop module (the NetFPGA's register map,
    driven through `tevbpf read|write`, as wraxi/rdaxi drive the card)."""

    def __init__(self, lab: SshLab):
        self.lab = lab
        self.ns = lab.hosts
        self.map_id = None

    def up(self):
        from tcpeval.backends.emulated.build import ensure_built

        art = ensure_built()
        s1, nf, r1 = self.ns["s1"], self.ns["nf"], self.ns["r1"]
        for ns, mine, peer, peer_ns, address, gateway, far in (
                (s1, "eth1", "d1", nf, "10.79.1.2/24", "10.79.1.1", "10.79.2.0/24"),
                (r1, "eth1", "d2", nf, "10.79.2.2/24", "10.79.2.1", "10.79.1.0/24")):
            sh("ip", "-n", ns, "link", "add", mine, "type", "veth", "peer", "name", peer, "netns", peer_ns)
            sh("ip", "-n", ns, "addr", "add", address, "dev", mine)
            sh("ip", "-n", ns, "link", "set", mine, "up")
            sh("ip", "-n", peer_ns, "addr", "add", gateway + "/24", "dev", peer)
            sh("ip", "-n", peer_ns, "link", "set", peer, "up")
            sh("ip", "-n", ns, "route", "add", far, "via", gateway)
            for dev_ns, dev in ((ns, mine), (peer_ns, peer)):
                # per-packet drop decisions need wire-sized frames, as on the real path
                sh("ip", "netns", "exec", dev_ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
                   check=False)
        sh("ip", "netns", "exec", nf, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        out = sh("ip", "netns", "exec", nf, art.tevbpf, "attach", art.datapath_obj, "tev_dropper", "d2", "egress")
        import json
        self.map_id = json.loads(out.stdout)["map_id"]
        self.tevbpf = art.tevbpf
        return self

    def rtt_ms(self):
        """The path's RTT as the backend's probe reads it (its pace: the same command)."""
        from tcpeval.backends.testbed.backend import parse_ping, ping_command
        return parse_ping(sh("ip", "netns", "exec", self.ns["s1"], *ping_command("10.79.2.2")).stdout)["median_ms"]

    def description(self, rtt_ms):
        lab = self.lab
        return {
            "ssh_command": lab.ssh_command, "ssh_options": lab.ssh_options,
            "senders": [{"name": "s1", "ssh": f"root@{lab.addresses['s1']}", "data_ip": "10.79.1.2", "iface": "eth1"}],
            "receivers": [{"name": "r1", "ssh": f"root@{lab.addresses['r1']}", "data_ip": "10.79.2.2", "iface": "eth1"}],
            "dropper": {"ssh": f"root@{lab.addresses['nf']}", "base": 0,
                        "write": f"{self.tevbpf} write {self.map_id} {{address:#x}} {{value}}",
                        "read": f"{self.tevbpf} read {self.map_id} {{address:#x}}"},
            "path": {"rtt_ms": rtt_ms, "rate_bps": None, "rtt_tolerance_ms": None},
            "cc_names": {"port": "{variant}316", "native": "{variant}"},
            "_source": "the test lab",
        }


@pytest.fixture
def testbed_lab(ssh_lab):
    """(lab, data path): real sshd hosts with a routed data path and a BPF drop module."""
    lock = open("/run/lock/tcpeval-net.lock", "a+")
    import fcntl
    fcntl.flock(lock, fcntl.LOCK_EX)  # traffic: keep other experiments off the CPUs
    # the lab stands for bare-metal hosts: its vCPUs kept from halting, as the emulated
    # backend keeps them during a run (idle wake-ups would be the RTT's jitter)
    from tcpeval.backends.emulated import awake
    from tcpeval.backends.emulated.build import ensure_built
    keep_awake = awake.KeepAwake(ensure_built().tevdelay)
    keep_awake.start()
    try:
        yield ssh_lab, DataPath(ssh_lab).up()
    finally:
        keep_awake.stop()
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
