"""Remote hosts of the real testbed, reached with the OpenSSH client.

One multiplexed connection per host (ControlMaster), so the many short commands of a run
(sysctls, ping, register reads) cost a round trip each, not a handshake each.
"""
from __future__ import annotations

import shlex
import subprocess
import tempfile

from tcpeval.backends.base import BackendError


class SshHost:
    """A testbed host: ``run`` and ``spawn`` execute argv lists there."""

    def __init__(self, name: str, target: str, *, ssh_command: list[str] | None = None,
                 options: list[str] | None = None, connect_timeout: float = 10):
        self.name = name
        self.target = target  # user@address[:port is given in options as -p]
        self._control_dir = tempfile.TemporaryDirectory(prefix="tcpeval-ssh-")
        self._base = list(ssh_command or ["ssh"]) + [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={int(connect_timeout)}",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self._control_dir.name}/%C",
            "-o", "ControlPersist=120",
            "-o", "ServerAliveInterval=5",
            *(options or []),
            target,
        ]

    def __repr__(self) -> str:
        return f"SshHost({self.name!r}, {self.target!r})"

    def _argv(self, args: list) -> list[str]:
        # The remote side runs the command through its shell: quote every word.
        return self._base + ["--", shlex.join(str(a) for a in args)]

    def run(self, args: list, *, check: bool = True, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(self._argv(args), capture_output=True, text=True,
                                  timeout=timeout, input=input)
        except subprocess.TimeoutExpired:
            raise BackendError(f"{self.name}: timed out after {timeout:.0f} s: {shlex.join(map(str, args))}") from None
        if check and proc.returncode != 0:
            what = "cannot reach the host over SSH" if proc.returncode == 255 else f"exit {proc.returncode}"
            raise BackendError(f"{self.name} ({self.target}): {what}: {shlex.join(map(str, args))}\n"
                               f"{(proc.stderr or proc.stdout).strip()}")
        return proc

    def spawn(self, args: list, *, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) -> subprocess.Popen:
        """Start a long-running remote command; ending the local process ends the session."""
        return subprocess.Popen(self._argv(args), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)

    def read_text(self, path: str, timeout: float = 60) -> str:
        return self.run(["cat", path], timeout=timeout).stdout

    def check_reachable(self) -> None:
        self.run(["true"], timeout=30)

    def close(self) -> None:
        """End the multiplexed connection (and with it, any remote command of ours)."""
        subprocess.run(self._base[:-1] + ["-O", "exit", self.target], capture_output=True, timeout=10)
        self._control_dir.cleanup()

    def __enter__(self) -> "SshHost":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def remote_tmpdir(host: SshHost, prefix: str = "tcpeval") -> str:
    return host.run(["mktemp", "-d", f"/tmp/{prefix}.XXXXXX"]).stdout.strip()
