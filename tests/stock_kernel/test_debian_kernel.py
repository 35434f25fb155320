"""The emulated backend on Debian 12's own kernel (linux-image-amd64, 6.1), which has
what this host's kernel lacks -- loadable modules, netem -- and lacks sysctls the
fidelity fixes use (tcp_shrink_window >= 6.5, tcp_backlog_ack_defer >= 6.8,
tcp_rto_min_us >= 6.11). The kernel boots under QEMU (tests/qemu_guest.py: the
host's file system read-only over 9p, a tmpfs on top) and runs, as a user would:

1. `tcpeval calibrate` over this directory's design (20 ms; the link forced to TBF,
   since the link engine's busy loop needs a CPU of its own that an emulated CPU is not);
2. one time-dilated run (x2, 10 ms virtual on the 20 ms physical path) of the Reno port
   inserted as a kernel module (--port-as kmod), the delay by netem, at twice the rate
   the calibration found faithful there.

It asserts what the trace says ran (kmod, netem, TBF, the kernel), the ACK clock, the
minimum RTO scaled on the route where the sysctl is missing, and the verdict, and keeps
the calibration, the trace and a summary in $TCPEVAL_TEST_ARTIFACTS. Without KVM (this
nested VM's aborts QEMU) it took 33 min on the idle 2-vCPU VM (calibration 29, the run 3:
software emulation carries 4 Mbit/s faithfully through TBF); marked slow (make test-all),
and not in .ci/run, whose 46 min it would bring to ~80 of the 90 allowed.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import qemu_guest as guest
from tcpeval import cc
from tcpeval.provenance import REPO_ROOT

pytestmark = pytest.mark.slow
GUEST_TIMEOUT_S = 90 * 60
DESIGN = Path(__file__).with_name("design.yaml")
VIRTUAL_RTT_MS, FACTOR, DROP, DURATION_S = 10, 2, 1e-3, 10

RUN_SH = """\
set -eu
export PATH={venv_bin}:$PATH PYTHONPATH={src} TCPEVAL_BUILD={x}/build TCPEVAL_CACHE={x}/cache
export TCPEVAL_LINK=tbf TCPEVAL_PORT_AS=kmod DVC_NO_ANALYTICS=1
cd {repo}
uname -r > {x}/kernel
cat /proc/sys/net/ipv4/tcp_available_congestion_control > {x}/cc-before
date +%s > {x}/t0
tcpeval calibrate --design {design} > {x}/calibrate.out
date +%s > {x}/t1
faithful=$(python3 -c 'import json,glob; c=json.load(open(glob.glob("{x}/cache/*.json")[0]));\
p=[p for p in c["points"] if p["flows"]==1 and p["rtt_ms"]=={phys}][0]; print(int(p["faithful"]["tbf"]["rate_bps"] or 0))')
echo "faithful $faithful" > {x}/faithful
test "$faithful" -gt 0
tcpeval run --backend emulated --variant reno --rtt {rtt} --drop {drop} --duration {dur} \\
  --rate $(( {k} * faithful )) --dilation {k} --out {x}/run
date +%s > {x}/t2
lsmod > {x}/lsmod-after
"""


def _artifacts(files: list[Path]) -> None:
    where = os.environ.get("TCPEVAL_TEST_ARTIFACTS")
    if where:
        dest = Path(where) / "stock-kernel"
        dest.mkdir(parents=True, exist_ok=True)
        for f in files:
            if f.exists():
                shutil.copy2(f, dest / f.name)


@pytest.mark.skipif(guest.missing() is not None, reason=f"needs {guest.missing()}")
def test_debian_kernel_runs_a_dilated_port_module_over_netem(tmp_path):
    release = guest.kernel_release()
    x = tmp_path / "x"
    x.mkdir()
    # the modules for the guest's kernel, built here (kbuild under emulation is slow),
    # where the guest's tcpeval looks for them (tcpeval.cc._kmod.module_path)
    cc.build_modules(x / "build" / "cc" / f"kmod-{release}", kdir=f"/lib/modules/{release}/build")
    (x / "run.sh").write_text(RUN_SH.format(
        venv_bin=Path(sys.executable).parent, src=REPO_ROOT / "src", repo=REPO_ROOT, x=x, design=DESIGN,
        phys=VIRTUAL_RTT_MS * FACTOR, rtt=VIRTUAL_RTT_MS, drop=DROP, dur=DURATION_S, k=FACTOR))
    rc, console, took = guest.boot(x, tmp_path, timeout_s=GUEST_TIMEOUT_S, console=x / "console.log")
    log = (x / "run.log").read_text() if (x / "run.log").exists() else ""
    cal_files = list((x / "cache").glob("*.json")) if (x / "cache").is_dir() else []
    _artifacts([x / "run.log", x / "console.log", x / "calibrate.out", x / "run" / "trace.json", *cal_files])
    assert "TEVGUEST booted " + release in console, console[-3000:]
    assert rc == 0, f"the guest's script failed ({rc}):\n{log[-6000:]}\n{console[-2000:]}"

    trace = json.loads((x / "run" / "trace.json").read_text())
    flow, mech, m = trace["flows"][0], trace["mechanisms"], trace["measured"]
    summary = {
        "kernel": trace["environment"]["kernel"], "wall_s": round(took),
        "calibration_s": int((x / "t1").read_text()) - int((x / "t0").read_text()),
        "run_s": int((x / "t2").read_text()) - int((x / "t1").read_text()),
        "faithful_bps_1flow_20ms": int((x / "faithful").read_text().split()[1]),
        "cc": flow["cc"], "delay": mech["delay"], "rate": mech["rate"], "drop": mech["drop"],
        "dilation": mech["dilation"], "acks": {k: v for k, v in (m.get("acks") or {}).items() if "steady" in k},
        "verdict": trace["fidelity"]["verdict"], "reasons": trace["fidelity"]["reasons"],
        "throughput_bps": flow["summary"]["mean_throughput_bps"],
        "sysctls_missing": sorted(k for k, v in trace["environment"]["sysctls"]["endpoints"]["s1"].items()
                                  if v is None),
    }
    (x / "summary.json").write_text(json.dumps(summary, indent=1))
    _artifacts([x / "summary.json"])
    print(json.dumps(summary, indent=1))

    assert trace["environment"]["kernel"] == release
    assert flow["cc"]["loaded_as"] == "kmod" and flow["cc"]["verified"] == "reno316", flow["cc"]
    assert flow["cc"]["dilation"] == FACTOR
    assert mech["delay"] == "netem" and mech["rate"] == "tbf", (mech["delay"], mech["rate"])
    assert mech["dilation"]["factor"] == FACTOR
    assert "rto_min" in mech["dilation"]["scaled"], mech["dilation"]
    spa = m["acks"]["receiver_segments_per_ack_steady"]
    assert 1.5 <= spa <= 2.5, f"the receivers ACKed every {spa} segments"
    assert trace["fidelity"]["verdict"] == "ok", trace["fidelity"]["reasons"]
    # the module was removed after the run
    assert "reno316" not in (x / "lsmod-after").read_text()
