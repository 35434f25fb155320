"""Reference model of the per-packet drop module (the paper's NetFPGA "bump in the wire").

This file is the single definition of the drop module's semantics. The Verilog core in
``hw/dropper``, the BPF program of the emulated backend and the tests all follow it, and
``tests/test_dropper_model.py`` pins shared test vectors.

Register map (32-bit registers, byte offsets, AXI-Lite in hardware, a BPF array map in
the emulated backend):

    0x00 CONTROL       bit0 ENABLE: drop decisions active (disabled: forward everything,
                                    count nothing)
                       bit1 RESEED: load SEED into the generator (self-clearing)
                       bit2 CLEAR : zero SEEN and DROPPED (self-clearing)
    0x04 THRESHOLD_LO  low 32 bits of the 33-bit threshold T
    0x08 THRESHOLD_HI  bit0: bit 32 of T (T = 2**32 drops every packet)
    0x0C SEED          generator seed; 0 is replaced by SEED_IF_ZERO (xorshift32 cannot
                       leave the all-zero state)
    0x10 SEEN_LO       packets seen while enabled, low 32 bits (read-only)
    0x14 SEEN_HI       high 32 bits
    0x18 DROPPED_LO    packets dropped, low 32 bits (read-only)
    0x1C DROPPED_HI    high 32 bits

Per packet, while enabled: state = xorshift32(state); SEEN += 1; the packet is dropped
iff state < T (compared as 33-bit unsigned), and then DROPPED += 1.

xorshift32 (Marsaglia 2003, shifts 13/17/5) is chosen because it is two lines of RTL,
one of BPF, and has period 2**32 - 1, far beyond any run's packet count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

MASK32 = 0xFFFFFFFF
SEED_IF_ZERO = 0x2545F491

REG_CONTROL = 0x00
REG_THRESHOLD_LO = 0x04
REG_THRESHOLD_HI = 0x08
REG_SEED = 0x0C
REG_SEEN_LO = 0x10
REG_SEEN_HI = 0x14
REG_DROPPED_LO = 0x18
REG_DROPPED_HI = 0x1C

CONTROL_ENABLE = 1 << 0
CONTROL_RESEED = 1 << 1
CONTROL_CLEAR = 1 << 2

# Power-on / hardware-reset values (axi_resetn in hw/dropper): DropModule() starts in
# exactly this state, and DropModule.reset() returns to it. Enabled with T = 0 means a
# freshly reset module forwards everything while counting packets.
RESET_THRESHOLD = 0
RESET_SEED = 1
RESET_ENABLED = True


def xorshift32(state: int) -> int:
    """One step of the generator; the returned state is also the packet's draw."""
    state ^= (state << 13) & MASK32
    state ^= state >> 17
    state ^= (state << 5) & MASK32
    return state & MASK32


def threshold_for(probability: float) -> int:
    """The 33-bit threshold register value for a drop probability p in [0, 1]."""
    if not (isinstance(probability, (int, float)) and math.isfinite(probability)):
        raise ValueError(f"drop probability must be a finite number, got {probability!r}")
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"drop probability must lie in [0, 1], got {probability}")
    return int(round(probability * 2**32))


def probability_of(threshold: int) -> float:
    """The drop probability a threshold register value realises."""
    return threshold / 2**32


def effective_seed(seed: int) -> int:
    seed &= MASK32
    return seed if seed else SEED_IF_ZERO


@dataclass
class DropModule:
    """Cycle-free model of the drop module: registers in, decisions and counters out."""

    threshold: int = 0
    seed: int = 1
    enabled: bool = True
    state: int = field(init=False)
    seen: int = field(init=False, default=0)
    dropped: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if not 0 <= self.threshold <= 2**32:
            raise ValueError(f"threshold must lie in [0, 2**32], got {self.threshold}")
        self.state = effective_seed(self.seed)

    @classmethod
    def for_probability(cls, probability: float, seed: int = 1) -> "DropModule":
        return cls(threshold=threshold_for(probability), seed=seed)

    def write(self, offset: int, value: int) -> None:
        value &= MASK32
        if offset == REG_CONTROL:
            self.enabled = bool(value & CONTROL_ENABLE)
            if value & CONTROL_RESEED:
                self.state = effective_seed(self.seed)
            if value & CONTROL_CLEAR:
                self.seen = self.dropped = 0
        elif offset == REG_THRESHOLD_LO:
            self.threshold = (self.threshold & ~MASK32) | value
        elif offset == REG_THRESHOLD_HI:
            self.threshold = ((value & 1) << 32) | (self.threshold & MASK32)
        elif offset == REG_SEED:
            self.seed = value
        else:
            raise ValueError(f"register 0x{offset:02X} is not writable")

    def read(self, offset: int) -> int:
        values = {
            REG_CONTROL: CONTROL_ENABLE if self.enabled else 0,
            REG_THRESHOLD_LO: self.threshold & MASK32,
            REG_THRESHOLD_HI: self.threshold >> 32,
            REG_SEED: self.seed & MASK32,
            REG_SEEN_LO: self.seen & MASK32,
            REG_SEEN_HI: (self.seen >> 32) & MASK32,
            REG_DROPPED_LO: self.dropped & MASK32,
            REG_DROPPED_HI: (self.dropped >> 32) & MASK32,
        }
        if offset not in values:
            raise ValueError(f"no register at 0x{offset:02X}")
        return values[offset]

    def reset(self) -> None:
        """Hardware reset: every register, the generator and the counters return to the
        power-on values (RESET_*), as after ``DropModule()``."""
        self.threshold = RESET_THRESHOLD
        self.seed = RESET_SEED
        self.enabled = RESET_ENABLED
        self.state = effective_seed(RESET_SEED)
        self.seen = self.dropped = 0

    def packet(self) -> bool:
        """Decide one packet; True means drop."""
        if not self.enabled:
            return False
        self.state = xorshift32(self.state)
        self.seen += 1
        drop = self.state < self.threshold
        if drop:
            self.dropped += 1
        return drop

    def drop_indices(self, packets: int) -> list[int]:
        """Indices (0-based) of the dropped packets among the next ``packets``."""
        return [i for i in range(packets) if self.packet()]
