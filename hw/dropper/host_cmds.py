#!/usr/bin/env python3
"""Print the host commands that program the drop module for a drop probability p.

    host_cmds.py --p 1e-5 --seed 42 --base 0x76400000 --tool wraxi   # NetFPGA-10G
    host_cmds.py --p 1e-5 --seed 42 --base 0x44090000 --tool rwaxi   # NetFPGA SUME
    host_cmds.py --read --base 0x76400000 --tool rdaxi               # counters

The base address is whatever the project's address map gave the core (XPS / Vivado
address editor); the values follow tcpeval.drop_model (threshold = round(p * 2**32)).
The sequence disables the core first so the two threshold halves never act as a mixed
33-bit value, then re-enables with RESEED and CLEAR: from there the drop sequence is
exactly DropModule(threshold, seed).drop_indices(...).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

try:
    from tcpeval import drop_model
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from tcpeval import drop_model

NAMES = {
    drop_model.REG_CONTROL: "CONTROL", drop_model.REG_THRESHOLD_LO: "THRESHOLD_LO",
    drop_model.REG_THRESHOLD_HI: "THRESHOLD_HI", drop_model.REG_SEED: "SEED",
    drop_model.REG_SEEN_LO: "SEEN_LO", drop_model.REG_SEEN_HI: "SEEN_HI",
    drop_model.REG_DROPPED_LO: "DROPPED_LO", drop_model.REG_DROPPED_HI: "DROPPED_HI",
}


def program_writes(probability: float, seed: int) -> list[tuple[int, int]]:
    t = drop_model.threshold_for(probability)
    go = drop_model.CONTROL_ENABLE | drop_model.CONTROL_RESEED | drop_model.CONTROL_CLEAR
    return [
        (drop_model.REG_CONTROL, 0),
        (drop_model.REG_THRESHOLD_LO, t & drop_model.MASK32),
        (drop_model.REG_THRESHOLD_HI, t >> 32),
        (drop_model.REG_SEED, seed & drop_model.MASK32),
        (drop_model.REG_CONTROL, go),
    ]


def write_cmd(tool: str, addr: int, value: int) -> str:
    if tool == "rwaxi":
        return f"rwaxi -a 0x{addr:08x} -w 0x{value:08x}"
    return f"wraxi 0x{addr:08x} 0x{value:08x}"


def read_cmd(tool: str, addr: int) -> str:
    return f"rwaxi -a 0x{addr:08x}" if tool == "rwaxi" else f"rdaxi 0x{addr:08x}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=float, help="drop probability in [0, 1]")
    ap.add_argument("--seed", type=lambda s: int(s, 0), default=1)
    ap.add_argument("--base", type=lambda s: int(s, 0), required=True)
    ap.add_argument("--tool", choices=["wraxi", "rdaxi", "rwaxi"], default="wraxi")
    ap.add_argument("--read", action="store_true", help="print counter reads instead")
    args = ap.parse_args(argv)
    if args.read:
        # HI, LO, HI: if the two HI reads differ the LO word wrapped in between; re-read.
        for off in (drop_model.REG_SEEN_HI, drop_model.REG_SEEN_LO, drop_model.REG_SEEN_HI,
                    drop_model.REG_DROPPED_HI, drop_model.REG_DROPPED_LO, drop_model.REG_DROPPED_HI):
            print(f"{read_cmd(args.tool, args.base + off)}   # {NAMES[off]}")
        return 0
    if args.p is None:
        ap.error("--p is required unless --read")
    t = drop_model.threshold_for(args.p)
    print(f"# p = {args.p:g}: threshold {t} (0x{t:09x}), realised p = "
          f"{drop_model.probability_of(t):.9g}")
    for off, value in program_writes(args.p, args.seed):
        print(f"{write_cmd(args.tool, args.base + off, value)}   # {NAMES[off]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
