"""Control of the BPF drop module (tev_dropper) through ``tevbpf``: attach, program the
registers exactly as tcpeval.drop_model.DropModule.write does, read the counters."""
from __future__ import annotations

import json

from tcpeval import drop_model as model
from tcpeval.backends.emulated import host
from tcpeval.backends.emulated.build import Artifacts


class BpfDropper:
    mechanism = "bpf-tc"  # draws serialised by a bpf_spin_lock: one order across CPUs

    def __init__(self, art: Artifacts, ns: str, dev: str, direction: str = "egress", *,
                 program: str = "tev_dropper", prio: int = 1, also: list[tuple[str, str]] = ()):
        """Attach ``program`` at ``dev``'s tc hook in ``ns`` -- and, for one module spanning
        several links, the same program and registers at each (ns, dev) of ``also``."""
        self.art, self.ns, self.dev, self.direction = art, ns, dev, direction
        self.program_name = program
        self.ports = [(ns, dev), *also]
        extra = [a for other_ns, other_dev in also for a in ("--also", f"{other_ns}/{other_dev}")]
        out = host.run([art.tevbpf, "attach", art.datapath_obj, program, dev, direction,
                        "--prio", str(prio), *extra], ns=ns)
        ids = json.loads(out.stdout)
        self.prog_id, self.map_id = ids["prog_id"], ids["map_id"]

    def write(self, offset: int, value: int) -> None:
        host.run([self.art.tevbpf, "write", str(self.map_id), hex(offset), str(value & model.MASK32)])

    def program(self, probability: float, seed: int) -> int:
        """Load threshold and seed, reseed the generator, clear the counters; disabled."""
        threshold = model.threshold_for(probability)
        self.write(model.REG_CONTROL, 0)
        self.write(model.REG_THRESHOLD_LO, threshold & model.MASK32)
        self.write(model.REG_THRESHOLD_HI, threshold >> 32)
        self.write(model.REG_SEED, seed)
        self.write(model.REG_CONTROL, model.CONTROL_RESEED | model.CONTROL_CLEAR)
        return threshold

    def enable(self) -> None:
        self.write(model.REG_CONTROL, model.CONTROL_ENABLE)

    def disable(self) -> None:
        self.write(model.REG_CONTROL, 0)

    def read(self) -> dict:
        return json.loads(host.run([self.art.tevbpf, "read", str(self.map_id)]).stdout)


def test_run(art: Artifacts, seed: int, threshold: int, packets: int) -> dict:
    """BPF_PROG_TEST_RUN the dropper ``packets`` times: {"drops": [...], "regs": {...}}."""
    out = host.run([art.tevbpf, "testrun", art.datapath_obj, str(seed), str(threshold), str(packets)],
                   timeout=600)
    return json.loads(out.stdout)


class DropStage:
    """The run's drop stage: the drop module (one program and register map on every
    receiver's link, after the bottleneck queue) and, with background loss, one more
    dropper per link behind it (the ring's own rare losses, independent of the module).
    Programmed disabled; enabled only while the traffic runs."""

    def __init__(self, art: Artifacts, links: list[tuple[str, str]], drop: float, seed: int,
                 background_loss: float = 0.0):
        self.module = BpfDropper(art, *links[0], "ingress", program="tev_drop_stage", also=links[1:])
        self.threshold = self.module.program(drop, seed)
        self.seed, self.background_loss = seed, background_loss
        self.background = []
        if background_loss > 0:
            for i, (ns, dev) in enumerate(links):
                bg = BpfDropper(art, ns, dev, "ingress", prio=2)
                bg.program(background_loss, ((seed ^ 0x5A5A5A5A) + i) & 0xFFFFFFFF)
                self.background.append(bg)

    def enable(self) -> None:
        self.module.enable()
        for bg in self.background:
            bg.enable()

    def disable(self) -> None:
        self.module.disable()
        for bg in self.background:
            bg.disable()

    def read(self) -> tuple[dict, list[dict]]:
        """(the module's counters, each background dropper's)."""
        return self.module.read(), [bg.read() for bg in self.background]

    def describe(self, counters: dict, wire_frame_bytes: int) -> dict:
        """mechanisms.drop_detail (where the stage sits and how TSO frames become wire
        packets before it: docs/trace-format.md)."""
        m = self.module
        return {"devices": [f"{ns.split('-', 1)[1]}:{dev}" for ns, dev in m.ports],
                "program": m.program_name,
                "threshold": self.threshold, "seed": self.seed,
                "wire_sized_packets": {
                    "max_frame_bytes": counters.get("max_frame_bytes"),
                    "frames_over_mtu": counters.get("frames_over_mtu"),
                    "mtu_frame_bytes": wire_frame_bytes}}

    def describe_background(self) -> dict | None:
        """mechanisms.background_loss."""
        if not self.background:
            return None
        return {"mechanism": "bpf-tc", "probability": self.background_loss,
                "devices": [bg.dev for bg in self.background]}
