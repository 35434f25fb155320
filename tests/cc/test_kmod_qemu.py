"""The ports as kernel modules, in a real kernel: Debian's 6.1 kernel (the one
linux-headers-amd64 matches) booted under QEMU with software emulation.

The host kernel has no loadable modules, so a guest does it: a minimal initramfs
(busybox-static, the .ko files, iperf3 and its libraries) insmods each module, checks
tcp_available_congestion_control, runs a 1 s iperf3 flow over loopback with
`-C <variant>316` and prints one parsable line per module:

    TEVCC-KMOD <name> insmod=<rc> available=<0|1> used=<sender_tcp_congestion> bytes=<n>

Needs: qemu-system-x86 (qemu-system-x86_64), linux-image-amd64 (/boot/vmlinuz-*-amd64
matching /usr/src/linux-headers-*-amd64), busybox-static, iperf3, cpio, gzip.
Skipped, with the reason, when any of them is missing.
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import qemu_guest
import tcpeval.cc as cc

GUEST_TIMEOUT = 240  # s; a boot plus the 1 s flows takes well under that on TCG
LINE = re.compile(r"^TEVCC-KMOD (\S+) insmod=(-?\d+) available=([01]) used=(\S*) bytes=(\d+)\s*$")

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
ip link set lo up
echo TEVCC-BOOTED $(uname -r)
for ko in /ko/*.ko; do
  name=$(basename "$ko" .ko)
  insmod "$ko"; rc=$?
  avail=0
  grep -qw "$name" /proc/sys/net/ipv4/tcp_available_congestion_control && avail=1
  iperf3 -s -1 -D -B 127.0.0.1 >/dev/null 2>&1
  sleep 1
  iperf3 -c 127.0.0.1 -t 1 -C "$name" -J > /tmp/out.json 2>/dev/null
  used=$(sed -n 's/.*"sender_tcp_congestion":[[:space:]]*"\([^"]*\)".*/\1/p' /tmp/out.json | head -n 1)
  bytes=$(sed -n '/"sum_sent"/,/}/s/.*"bytes":[[:space:]]*\([0-9]*\).*/\1/p' /tmp/out.json | head -n 1)
  echo "TEVCC-KMOD $name insmod=$rc available=$avail used=$used bytes=${bytes:-0}"
done
echo TEVCC-DONE
poweroff -f
"""


def _guest_kernel() -> tuple[Path | None, str]:
    """Debian's vmlinuz whose release matches the headers the modules build against."""
    kd = cc.kernel_headers()
    if kd is None:
        return None, "kernel headers (apt-get install linux-headers-amd64)"
    release = kd.name.removeprefix("linux-headers-")
    image = Path(f"/boot/vmlinuz-{release}")
    if not image.exists():
        return None, f"{image} (apt-get install linux-image-amd64, matching {kd.name})"
    if not os.access(image, os.R_OK):
        return None, f"read access to {image}"
    return image, release


def _missing() -> str | None:
    need = {"qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static",
            "iperf3": "iperf3", "ldd": "libc-bin", "cpio": "cpio"}
    absent = [f"{tool} (apt-get install {pkg})" for tool, pkg in need.items()
              if shutil.which(tool) is None]
    if shutil.which("busybox"):
        # the guest has no libc of its own for busybox: it must be static
        info = subprocess.run(["ldd", shutil.which("busybox")], capture_output=True, text=True)
        if "not a dynamic executable" not in info.stdout + info.stderr:
            absent.append("a static busybox (apt-get install busybox-static)")
    image, why = _guest_kernel()
    if image is None:
        absent.append(why)
    return ", ".join(absent) or None


def _libs(binary: str) -> list[Path]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return [Path(m) for m in re.findall(r"(/\S+\.so[.\d]*)", out)]


def _initramfs(tmp: Path, kos: list[Path]) -> Path:
    root = tmp / "root"
    for d in ("bin", "proc", "sys", "dev", "tmp", "ko"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(shutil.which("busybox"), root / "bin" / "busybox")
    iperf = shutil.which("iperf3")
    shutil.copy2(iperf, root / "bin" / "iperf3")
    for lib in _libs(iperf):  # the dynamic loader and the libraries, at their paths
        dest = root / lib.relative_to("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib.resolve(), dest)
    for ko in kos:
        shutil.copy2(ko, root / "ko" / ko.name)
    init = root / "init"
    init.write_text(INIT)
    init.chmod(0o755)
    image = tmp / "initramfs.cpio.gz"
    image.write_bytes(gzip.compress(qemu_guest.cpio_newc(root), compresslevel=6))
    return image


@pytest.mark.skipif(_missing() is not None, reason=f"needs {_missing()}")
def test_modules_load_and_carry_a_flow_in_debian_kernel(tmp_path):
    kernel, release = _guest_kernel()
    kos = cc.build_modules(tmp_path / "build")
    assert [k.name for k in kos] == [f"{v}316.ko" for v in cc.VARIANTS]
    initrd = _initramfs(tmp_path, kos)
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", "512M", "-smp", "1", "-nographic",
           "-no-reboot", "-kernel", str(kernel), "-initrd", str(initrd),
           "-append", "console=ttyS0 panic=-1 quiet loglevel=3"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    try:
        out, _ = proc.communicate(timeout=GUEST_TIMEOUT)
    finally:
        if proc.poll() is None:  # never leave a guest running
            proc.kill()
            proc.communicate()
    assert f"TEVCC-BOOTED {release}" in out, out[-3000:]
    assert "TEVCC-DONE" in out, out[-3000:]
    print("\n".join(ln for ln in out.splitlines() if ln.startswith("TEVCC-")))
    got = {m.group(1): m.groups()[1:] for m in map(LINE.match, out.splitlines()) if m}
    assert sorted(got) == sorted(f"{v}316" for v in cc.VARIANTS), out[-3000:]
    for name, (rc, avail, used, nbytes) in got.items():
        assert rc == "0", f"insmod {name} failed: {out[-3000:]}"
        assert avail == "1", f"{name} not in tcp_available_congestion_control"
        assert used == name, f"iperf3 -C {name}: the sender used {used!r}"
        assert int(nbytes) > 1_000_000, f"{name}: only {nbytes} bytes in 1 s over loopback"
