"""Commands reach testbed hosts through a real OpenSSH server."""
import subprocess

import pytest

from tcpeval.backends.base import BackendError
from tcpeval.backends.testbed.hosts import SshHost

pytestmark = pytest.mark.root


def host(lab, name):
    return SshHost(name, f"root@{lab.addresses[name]}", ssh_command=lab.ssh_command, options=lab.ssh_options)


def test_commands_run_on_the_named_host_with_arguments_quoted(ssh_lab):
    with host(ssh_lab, "s1") as s1, host(ssh_lab, "r1") as r1:
        assert s1.run(["ip", "-4", "-o", "addr", "show", "mgmt0"]).stdout.count(ssh_lab.addresses["s1"]) == 1
        assert r1.run(["printf", "%s|", "two words", "$HOME", "a;b"]).stdout == "two words|$HOME|a;b|"


def test_files_are_read_back_and_failures_name_host_and_command(ssh_lab):
    with host(ssh_lab, "s1") as s1:
        s1.run(["sh", "-c", "echo payload > /tmp/tcpeval-ssh-test"])
        assert s1.read_text("/tmp/tcpeval-ssh-test") == "payload\n"
        s1.run(["rm", "/tmp/tcpeval-ssh-test"])
        with pytest.raises(BackendError, match=r"s1 \(root@10\.78\.0\.\d+\): exit 1: false"):
            s1.run(["false"])


def test_spawned_command_runs_until_stopped(ssh_lab):
    with host(ssh_lab, "r1") as r1:
        proc = r1.spawn(["sh", "-c", "echo started; sleep 30"], stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"started\n"
        proc.terminate()
        assert proc.wait(timeout=10) is not None


def test_unreachable_host_is_named(ssh_lab):
    ghost = SshHost("s9", "root@10.78.0.99", ssh_command=ssh_lab.ssh_command,
                    options=ssh_lab.ssh_options + ["-o", "ConnectTimeout=1"], connect_timeout=1)
    with pytest.raises(BackendError, match="s9 .*cannot reach the host over SSH"):
        ghost.check_reachable()
    ghost.close()
