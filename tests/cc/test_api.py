"""API, CLI and build checks that need no privileges (the kmod build needs headers)."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tcpeval.cc as cc
from tcpeval.cli import main

# the remaining 3.16 modules, ported after the paper's six, in this order
NEW_PORTS = ("hybla", "illinois", "lp", "vegas", "veno", "westwood", "yeah")


def test_unknown_variant_names_allowed_values():
    with pytest.raises(ValueError, match="allowed: " + ", ".join(cc.VARIANTS + cc.EXTRA_VARIANTS) + "$"):
        with cc.loaded("bbr"):
            pass
    with pytest.raises(ValueError, match="allowed: port, native"):
        with cc.loaded("bic", impl="kernel"):
            pass


def test_names_are_short_and_distinct():
    names = [cc.kernel_name(v) for v in cc.VARIANTS]
    assert names[:6] == ["reno316", "scalable316", "highspeed316", "htcp316", "bic316", "cubic316"]
    assert names[6:] == [v + "316" for v in NEW_PORTS]  # the paper's six first, then the others
    assert all(len(n) < 16 for n in names) and not set(names) & {"reno", "cubic", "bbr"}


def test_build_is_idempotent(tmp_path):
    out = cc.build(tmp_path / "b")
    objs = sorted((out / "bpf").glob("*316.bpf.o"))
    assert [o.name for o in objs] == sorted(f"{v}316.bpf.o" for v in cc.VARIANTS)
    assert (out / "tevcc-loader").exists() and (out / "vmlinux.h").exists()
    before = [(o.stat().st_mtime_ns, o.read_bytes()) for o in objs]
    cc.build(tmp_path / "b")
    assert [(o.stat().st_mtime_ns, o.read_bytes()) for o in objs] == before  # nothing rebuilt


def _digest(*files: Path) -> str:
    """The source digest as documented: for each file (shim first), its name, NUL, its
    length, NUL, then its bytes."""
    h = hashlib.sha256()
    for f in files:
        data = f.read_bytes()
        h.update(f.name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def test_source_hash_covers_the_shim_and_the_source_and_follows_their_bytes(tmp_path, monkeypatch):
    from tcpeval.cc import _common

    copy = tmp_path / "cc"
    shutil.copytree(_common.CC_DIR / "src", copy / "src")
    shutil.copytree(_common.CC_DIR / "include", copy / "include")
    shim, bic, cubic = copy / "include" / "cc316.h", copy / "src" / "bic316.c", copy / "src" / "cubic316.c"
    monkeypatch.setattr(_common, "CC_DIR", copy)
    monkeypatch.setattr(_common, "SHIM", shim)
    # recomputed from the bytes on disk, in a fresh interpreter too (stable across runs)
    assert cc.source_sha256("bic") == _digest(shim, bic) != _digest(shim, cubic) == cc.source_sha256("cubic")
    repo_cc = _common.REPO_ROOT / "cc"
    fresh = subprocess.run([sys.executable, "-c", "import tcpeval.cc as cc; print(cc.source_sha256('bic'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert fresh == _digest(repo_cc / "include" / "cc316.h", repo_cc / "src" / "bic316.c")
    # one byte more in a source changes its hash only; in the shim, every hash
    old_bic, old_cubic = cc.source_sha256("bic"), cc.source_sha256("cubic")
    bic.write_bytes(bic.read_bytes() + b"\n")
    assert cc.source_sha256("bic") not in (old_bic, old_cubic) and cc.source_sha256("cubic") == old_cubic
    assert cc.source_sha256("bic") == _digest(shim, bic)
    old_bic = cc.source_sha256("bic")
    shim.write_bytes(shim.read_bytes() + b"/* */\n")
    assert cc.source_sha256("bic") != old_bic and cc.source_sha256("cubic") != old_cubic


def test_native_needs_a_builtin():
    with pytest.raises(cc.CCError, match="native 'bic' is not available"):
        with cc.loaded("bic", impl="native"):
            pass
    with cc.loaded("cubic", impl="native") as h:
        assert h.kernel_name == "cubic" and h.object_sha256 is None


def test_cli_params_json_and_list(capsys):
    assert main(["cc", "params", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cubic"]["beta"]["value"] == 717
    assert main(["cc", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["variants"]
    assert [r["variant"] for r in rows] == list(cc.VARIANTS)
    assert {r["variant"]: r["native_available"] for r in rows}["reno"] == ("reno" in cc.available_algorithms())
    assert main(["cc", "params", "--variant", "bbr"]) == 2
    assert "allowed:" in capsys.readouterr().err


def test_check_host_names_what_is_missing(monkeypatch):
    from tcpeval.cc import _build
    monkeypatch.setattr(_build, "host_status", lambda: {
        "privileges": False, "btf": True, "struct_ops": False, "clang": True,
        "bpftool": True, "libbpf": True, "cc": True})
    with pytest.raises(cc.HostError, match="root or CAP_BPF\\+CAP_NET_ADMIN.*struct_ops"):
        _build.check_host()


def test_kernel_modules_build(tmp_path):
    kdir = cc.kernel_headers()
    if kdir is None:
        pytest.skip("no /usr/src/linux-headers-*-amd64 (apt-get install linux-headers-amd64)")
    kos = cc.build_modules(tmp_path / "k")
    assert [k.name for k in kos] == [f"{v}316.ko" for v in cc.VARIANTS]
    for v, ko in zip(cc.VARIANTS, kos):
        data = ko.read_bytes()
        assert b"parm=cc_hz:" in data and b"license=GPL" in data  # .modinfo
        assert b"parm=cc_dilation:" in data                       # time dilation (cc316.h)
        assert f"{v}316".encode() in data  # the .name in the ops


def test_a_port_as_a_kernel_module_names_what_the_host_lacks(monkeypatch):
    from tcpeval.cc import _kmod
    monkeypatch.setattr(_kmod, "PROC_MODULES", Path("/nonexistent/proc/modules"))
    with pytest.raises(cc.HostError, match="cannot load reno316 as a kernel module: this host lacks "
                                           "loadable-module support"):
        with cc.loaded("reno", loaded_as="kmod"):
            pass
    with pytest.raises(cc.CCError, match="loaded as one of struct_ops, kmod, not 'ko'"):
        with cc.loaded("reno", loaded_as="ko"):
            pass
