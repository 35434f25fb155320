"""Real OpenSSH servers in network namespaces, for the tests that talk SSH (the testbed
backend's hosts, the DVC SSH remote): on one machine, with throw-away keys.

A management network joins a controller namespace (where the SSH client runs) to each
host namespace; every host runs its own sshd with a throw-away host key that accepts one
throw-away client key. Nothing touches the host's own namespace.
"""
import os
import secrets
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def sh(*args, check=True):
    return subprocess.run([str(a) for a in args], check=check, capture_output=True, text=True)


def require_root_and_openssh():
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
                f"PidFile {self.root}/sshd_{name}.pid\nStrictModes no\nMaxSessions 50\nMaxStartups 50\n"
                # SFTP from sshd itself: the DVC SSH remote (dvc-ssh) moves files over it
                "Subsystem sftp internal-sftp\n")
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


@contextmanager
def running_ssh_lab(root: Path, names: list[str]):
    """An SshLab with hosts ``names``, keys and logs under ``root``; its namespaces and
    sshd processes are removed on the way out, whether the test passed, failed or the lab
    never came up."""
    require_root_and_openssh()
    lab = SshLab(root, names)
    try:
        yield lab.up()
    finally:
        lab.down()
