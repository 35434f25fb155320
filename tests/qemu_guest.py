"""Debian 12's own kernel, booted under QEMU with this host's file system inside.

The guest sees the host's root read-only over 9p (virtio), with a tmpfs overlay on top
so that builds, caches and /run are its own and nothing of the host changes; one host
directory (``exchange``) is shared read-write, at the same path, for the script it runs
(``exchange/run.sh``, its output in ``exchange/run.log``) and what it leaves.
An initramfs of busybox and the kernel's own 9p/overlay/virtio modules does the mounts,
then the guest runs ``exchange/run.sh`` in the overlay as root and powers off.

Used by tests/stock_kernel/test_debian_kernel.py (tests/cc/test_kmod_qemu.py shares its
initramfs packing); by hand:

    python tests/qemu_guest.py EXCHANGE_DIR   # runs EXCHANGE_DIR/run.sh
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

MODULES = ("virtio_pci", "9pnet_virtio", "9p", "overlay")  # with their dependencies
HOST_TAG, EXCHANGE_TAG = "hostroot", "exchange"

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for ko in $(cat /modules.order); do insmod /ko/$ko || echo "TEVGUEST insmod $ko failed"; done
mkdir -p /host /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host || echo "TEVGUEST 9p root failed"
mount -t tmpfs -o size=75% tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || echo "TEVGUEST overlay failed"
mount -t proc proc /newroot/proc
mount -t sysfs sys /newroot/sys
mount -t devtmpfs dev /newroot/dev
X=$(sed -n 's/.* tevx=\([^ ]*\).*/\1/p' /proc/cmdline)
mkdir -p "/newroot$X"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 exchange "/newroot$X" || echo "TEVGUEST 9p exchange failed"
echo "TEVGUEST booted $(uname -r) cpus=$(nproc)"
export X
exec chroot /newroot /bin/sh -c '
mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /dev/shm 2>/dev/null
mount -t bpf bpf /sys/fs/bpf; mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null; mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /run/netns /run/lock
ip link set lo up
cd "$X" && sh "$X/run.sh" > "$X/run.log" 2>&1; echo "TEVGUEST rc=$?"
sync; echo o > /proc/sysrq-trigger; poweroff -f'
"""


def kernel_release() -> str | None:
    """The release of Debian's stock kernel image (linux-image-amd64), the newest."""
    found = sorted(Path("/boot").glob("vmlinuz-*-amd64"))
    return found[-1].name.removeprefix("vmlinuz-") if found else None


def missing() -> str | None:
    need = {"qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static", "cpio": "cpio"}
    absent = [f"{tool} (apt-get install {pkg})" for tool, pkg in need.items() if shutil.which(tool) is None]
    release = kernel_release()
    if release is None:
        absent.append("a Debian kernel image in /boot (apt-get install linux-image-amd64)")
    elif not Path(f"/lib/modules/{release}/modules.dep").exists():
        absent.append(f"/lib/modules/{release} (linux-image-{release})")
    elif not Path(f"/lib/modules/{release}/build/Makefile").exists():
        absent.append(f"its headers (apt-get install linux-headers-{release})")
    return ", ".join(absent) or None


def _module_order(release: str) -> list[Path]:
    """MODULES and what they need, dependencies first (modules.dep)."""
    base = Path("/lib/modules") / release
    deps: dict[str, list[str]] = {}
    for line in (base / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    by_name = {Path(m).name.split(".ko")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(mod: str) -> None:
        if mod in order:
            return
        for dep in reversed(deps[mod]):
            visit(dep)
        order.append(mod)

    for name in MODULES:
        visit(by_name[name])
    return [base / m for m in order]


def cpio_newc(root: Path) -> bytes:
    names = "\n".join(sorted(str(p.relative_to(root)) for p in root.rglob("*"))) + "\n"
    proc = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=names.encode(),
                          capture_output=True)
    if proc.returncode:
        raise RuntimeError(f"cpio failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def initramfs(release: str, where: Path) -> Path:
    root = where / "initramfs"
    for d in ("bin", "proc", "sys", "dev", "ko"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(shutil.which("busybox"), root / "bin" / "busybox")
    names = []
    for ko in _module_order(release):
        shutil.copy2(ko, root / "ko" / ko.name)
        names.append(ko.name)
    (root / "modules.order").write_text("\n".join(names) + "\n")
    (root / "init").write_text(INIT)
    (root / "init").chmod(0o755)
    image = where / "initramfs.cpio.gz"
    image.write_bytes(gzip.compress(cpio_newc(root), compresslevel=1))
    return image


def accelerator() -> str:
    """tcg unless TCPEVAL_GUEST_ACCEL says otherwise: on this nested VM a KVM guest of
    QEMU 7.2 aborts on MSR 0x10a with -cpu host and, without arch-capabilities, hangs
    in early boot."""
    return os.environ.get("TCPEVAL_GUEST_ACCEL", "tcg")


def boot(exchange: Path, work: Path, timeout_s: float, accel: str | None = None,
         cpus: int = 2, memory: str = "4G", console: Path | None = None) -> tuple[int | None, str, float]:
    """Boot the stock kernel, run exchange/run.sh inside; returns (the script's exit
    status or None, the console output, seconds)."""
    release = kernel_release()
    if release is None:
        raise RuntimeError(missing())
    accel = accel or accelerator()
    initrd = initramfs(release, work)
    cpu = ["-cpu", "max"] if accel == "tcg" else ["-cpu", "host"]
    cmd = ["qemu-system-x86_64", "-accel", accel, *cpu, "-m", memory, "-smp", str(cpus),
           "-nographic", "-no-reboot", "-kernel", f"/boot/vmlinuz-{release}", "-initrd", str(initrd),
           "-append", f"console=ttyS0 panic=-1 quiet loglevel=3 tevx={exchange}",
           "-fsdev", "local,id=fs0,path=/,security_model=passthrough,readonly=on,multidevs=remap",
           "-device", f"virtio-9p-pci,fsdev=fs0,mount_tag={HOST_TAG}",
           "-fsdev", f"local,id=fs1,path={exchange},security_model=passthrough",
           "-device", f"virtio-9p-pci,fsdev=fs1,mount_tag={EXCHANGE_TAG}"]
    start = time.monotonic()
    out_fh = open(console, "w") if console else None
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    lines = []
    try:
        deadline = start + timeout_s
        for line in proc.stdout:
            lines.append(line)
            if out_fh:
                out_fh.write(line)
                out_fh.flush()
            if time.monotonic() > deadline:
                break
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:  # never leave a guest running
            proc.kill()
            proc.wait()
        if out_fh:
            out_fh.close()
    out = "".join(lines)
    m = re.search(r"TEVGUEST rc=(\d+)", out)
    return (int(m.group(1)) if m else None), out, time.monotonic() - start


if __name__ == "__main__":
    xdir = Path(sys.argv[1]).resolve()
    rc, out, took = boot(xdir, xdir, timeout_s=float(os.environ.get("TIMEOUT", "3600")),
                         console=xdir / "console.log")
    print(f"rc={rc} took {took:.0f} s")
