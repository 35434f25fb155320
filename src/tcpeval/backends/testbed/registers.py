"""The NetFPGA drop module's registers, reached through the card's register tool on its
host (NetFPGA-10G: rdaxi/wraxi; SUME: rwaxi), over SSH.

The register semantics are tcpeval.drop_model's, the same as the RTL in hw/dropper and the
emulated backend's BPF dropper; only the transport differs.
"""
from __future__ import annotations

import re

from tcpeval import drop_model
from tcpeval.backends.base import BackendError

_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\b\d+\b")


class RegisterBus:
    """Register access by command templates, e.g. write ``wraxi {address:#x} {value:#x}``,
    read ``rdaxi {address:#x}``; ``address`` = base + register offset."""

    def __init__(self, host, write: str, read: str, base: int = 0):
        self.host, self.write_template, self.read_template, self.base = host, write, read, base

    def write(self, offset: int, value: int) -> None:
        cmd = self.write_template.format(address=self.base + offset, value=value & drop_model.MASK32)
        self.host.run(cmd.split())

    def read(self, offset: int) -> int:
        cmd = self.read_template.format(address=self.base + offset)
        out = self.host.run(cmd.split()).stdout
        # Tools print e.g. "0x7a800010 = 0x0000002a": the value is the last number.
        numbers = _NUMBER.findall(out)
        if not numbers:
            raise BackendError(f"{self.host.name}: register read printed no number: {cmd!r} -> {out!r}")
        return int(numbers[-1], 0)


def program(bus: RegisterBus, probability: float, seed: int) -> int:
    """Set the drop probability and seed, restart the generator, zero the counters, enable.
    Returns the threshold written."""
    threshold = drop_model.threshold_for(probability)
    bus.write(drop_model.REG_CONTROL, 0)
    bus.write(drop_model.REG_THRESHOLD_LO, threshold & drop_model.MASK32)
    bus.write(drop_model.REG_THRESHOLD_HI, threshold >> 32)
    bus.write(drop_model.REG_SEED, seed)
    bus.write(drop_model.REG_CONTROL, drop_model.CONTROL_ENABLE | drop_model.CONTROL_RESEED | drop_model.CONTROL_CLEAR)
    readback = bus.read(drop_model.REG_THRESHOLD_LO) | (bus.read(drop_model.REG_THRESHOLD_HI) << 32)
    if readback != threshold:
        raise BackendError(f"drop module: threshold read back {readback:#x}, wrote {threshold:#x}")
    return threshold


def read64(bus: RegisterBus, lo: int, hi: int) -> int:
    """A live 64-bit counter as two 32-bit reads: HI, LO, HI, again if HI moved (the low
    word wrapped between the reads)."""
    for _ in range(4):
        high = bus.read(hi)
        low = bus.read(lo)
        if bus.read(hi) == high:
            return (high << 32) | low
    raise BackendError("drop module: counter kept wrapping while being read")


def counters(bus: RegisterBus) -> tuple[int, int]:
    """(seen, dropped) since the last CLEAR."""
    return (read64(bus, drop_model.REG_SEEN_LO, drop_model.REG_SEEN_HI),
            read64(bus, drop_model.REG_DROPPED_LO, drop_model.REG_DROPPED_HI))


def disable(bus: RegisterBus) -> None:
    bus.write(drop_model.REG_CONTROL, 0)
