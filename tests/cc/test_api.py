"""API, CLI and build checks that need no privileges (the kmod build needs headers)."""
from __future__ import annotations

import json
import sys

import pytest

import tcpeval.cc as cc
from tcpeval.cli import main


def test_unknown_variant_names_allowed_values():
    with pytest.raises(ValueError, match="allowed: reno, scalable, highspeed, htcp, bic, cubic"):
        with cc.loaded("vegas"):
            pass
    with pytest.raises(ValueError, match="allowed: port, native"):
        with cc.loaded("bic", impl="kernel"):
            pass


def test_names_are_short_and_distinct():
    names = [cc.kernel_name(v) for v in cc.VARIANTS]
    assert names == ["reno316", "scalable316", "highspeed316", "htcp316", "bic316", "cubic316"]
    assert all(len(n) < 16 for n in names) and not set(names) & {"reno", "cubic", "bbr"}


def test_build_is_idempotent_and_hashes_are_stable(tmp_path):
    out = cc.build(tmp_path / "b")
    objs = sorted((out / "bpf").glob("*316.bpf.o"))
    assert [o.name for o in objs] == sorted(f"{v}316.bpf.o" for v in cc.VARIANTS)
    assert (out / "tevcc-loader").exists() and (out / "vmlinux.h").exists()
    mtimes = [o.stat().st_mtime_ns for o in objs]
    cc.build(tmp_path / "b")
    assert [o.stat().st_mtime_ns for o in objs] == mtimes  # nothing rebuilt
    assert cc.source_sha256("bic") == cc.source_sha256("bic") != cc.source_sha256("cubic")


def test_cli_params_json_and_list(capsys):
    assert main(["cc", "params", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cubic"]["beta"]["value"] == 717
    assert main(["cc", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["variants"]
    assert [r["variant"] for r in rows] == list(cc.VARIANTS)
    assert {r["variant"]: r["native_available"] for r in rows}["reno"] == ("reno" in cc.available_algorithms())
    assert main(["cc", "params", "--variant", "vegas"]) == 2
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
        assert f"{v}316".encode() in data  # the .name in the ops
