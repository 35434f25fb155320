"""Real OpenSSH servers in network namespaces: the testbed backend's hosts, on one machine.

A management network joins a controller namespace (where the SSH client runs) to each
host namespace; every host runs its own sshd with a throw-away host key that accepts one
throw-away client key. Nothing touches the host's own namespace.
"""
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def sh(*args, check=True):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True, text=True)


def _require_root():
    assert os.geteuid() == 0, "the SSH lab needs root: mark the test @pytest.mark.root"
    assert Path(SSHD).exists() and shutil.which("ssh"), \
        "no sshd/ssh: openssh-server is in tools/apt-packages.txt; run `make bootstrap`"


class SshLab:
    """Controller + hosts, each host with sshd on 10.78.0.<10+i>."""

    def __init__(self, root: Path, names: list[str]):
        self.id = secrets.token_hex(3)
        self.root = root
        self.ctl = f"tevtb{self.id}-ctl"
        self.hosts = {name: f"tevtb{self.id}-{name}" for name in names}
        self.addresses = {}
        self.procs = []
        self.key = root / "id_ed25519"

    def up(self):
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.root / "host_key")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
        sh("ip", "netns", "add", self.ctl)
        sh("ip", "-n", self.ctl, "link", "add", "mgmt", "type", "bridge")
        sh("ip", "-n", self.ctl, "addr", "add", "10.78.0.1/24", "dev", "mgmt")
        sh("ip", "-n", self.ctl, "link", "set", "mgmt", "up")
        sh("ip", "-n", self.ctl, "link", "set", "lo", "up")
        for i, (name, ns) in enumerate(self.hosts.items()):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", self.ctl, "link", "add", f"m{i}", "type", "veth", "peer", "name", "mgmt0", "netns", ns)
            sh("ip", "-n", self.ctl, "link", "set", f"m{i}", "master", "mgmt", "up")
            address = f"10.78.0.{10 + i}"
            sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            self.addresses[name] = address
            config = self.root / f"sshd_{name}.conf"
            config.write_text(
                f"ListenAddress {address}\nHostKey {self.root}/host_key\n"
                f"AuthorizedKeysFile {self.key}.pub\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                f"PidFile {self.root}/sshd_{name}.pid\nStrictModes no\nMaxSessions 50\nMaxStartups 50\n")
            self.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, SSHD, "-D", "-e", "-f", str(config)],
                stdout=subprocess.DEVNULL, stderr=open(self.root / f"sshd_{name}.log", "w")))
        for name in self.hosts:
            self._wait_port(self.addresses[name])
        return self

    def _wait_port(self, address, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sh("ip", "netns", "exec", self.ctl, "bash", "-c",
                  f"exec 3<>/dev/tcp/{address}/22", check=False).returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd on {address} did not come up")

    @property
    def ssh_command(self):
        return ["ip", "netns", "exec", self.ctl, "ssh"]

    @property
    def ssh_options(self):
        return ["-i", str(self.key), "-o", "StrictHostKeyChecking=no",
                "-o", f"UserKnownHostsFile={self.root}/known_hosts", "-o", "LogLevel=ERROR"]

    def down(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        for ns in [*self.hosts.values(), self.ctl]:
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                sh("kill", "-9", pid, check=False)
            sh("ip", "netns", "del", ns, check=False)


@pytest.fixture
def ssh_lab(tmp_path):
    _require_root()
    lab = SshLab(tmp_path, ["s1", "r1", "nf"])
    try:
        yield lab.up()
    finally:
        lab.down()


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
        import re
        import statistics
        out = sh("ip", "netns", "exec", self.ns["s1"], "ping", "-n", "-c", "20", "-i", "0.01", "10.79.2.2").stdout
        return statistics.median(float(t) for t in re.findall(r"time=([0-9.]+) ms", out))

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
    try:
        yield ssh_lab, DataPath(ssh_lab).up()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
