"""Control of the BPF drop module (tev_dropper) through ``tevbpf``: attach, program the
registers exactly as tcpeval.dropper.DropModule.write does, read the counters."""
from __future__ import annotations

import json

from tcpeval import dropper as model
from tcpeval.backends.emulated import host
from tcpeval.backends.emulated.build import Artifacts


class BpfDropper:
    mechanism = "bpf-tc"
    concurrency = "bpf_spin_lock (one total order of draws across CPUs)"

    def __init__(self, art: Artifacts, ns: str, dev: str, direction: str = "egress", *,
                 program: str = "tev_dropper", prio: int = 1, also: list[tuple[str, str]] = ()):
        """Attach ``program`` at ``dev``'s tc hook in ``ns`` -- and, for one module spanning
        several links, the same program and registers at each (ns, dev) of ``also``."""
        self.art, self.ns, self.dev, self.direction = art, ns, dev, direction
        self.program_name = program
        self.ports = [(ns, dev), *also]
        extra = [a for other_ns, other_dev in also for a in ("--also", f"{other_ns}/{other_dev}")]
        out = host.run([art.tevbpf, "attach", art.dropper_obj, program, dev, direction,
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
    out = host.run([art.tevbpf, "testrun", art.dropper_obj, str(seed), str(threshold), str(packets)],
                   timeout=600)
    return json.loads(out.stdout)
