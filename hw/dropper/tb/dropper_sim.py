"""Drive the tcpeval_dropper RTL under Icarus and compare it with tcpeval.drop_model.

A ``Scenario`` is built step by step (register writes and reads, packet bursts). Each step
is applied to the Python reference model at once, which yields the expected AXI-Lite
responses and the expected forwarded beats; the same steps are written as a program for
the Verilog bench (tb_dropper.v). ``run`` compiles (once per data width), simulates, and
returns what the DUT did next to what the model predicts.
"""
from __future__ import annotations

import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tcpeval.drop_model import MASK32, DropModule

HERE = Path(__file__).resolve().parent
RTL = HERE.parent / "rtl" / "tcpeval_dropper.v"
TB = HERE / "tb_dropper.v"

OP_END, OP_WRITE, OP_READ, OP_STREAM, OP_IDLE, OP_RESET = 0, 1, 2, 3, 4, 5
RESP_OKAY, RESP_SLVERR = 0, 2
UW = 128


def have_icarus() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def compile_tb(build_dir: Path, data_width: int = 256) -> Path:
    """Compile the bench for one TDATA width; returns the vvp image."""
    build_dir.mkdir(parents=True, exist_ok=True)
    image = build_dir / f"tb_dw{data_width}.vvp"
    subprocess.run(
        ["iverilog", "-g2005", "-Wall", "-Wno-timescale", "-s", "tb",
         f"-Ptb.DW={data_width}", "-o", str(image), str(TB), str(RTL)],
        check=True, capture_output=True, text=True,
    )
    return image


def _merge(old: int, value: int, strb: int) -> int:
    out = 0
    for lane in range(4):
        src = value if strb >> lane & 1 else old
        out |= src & (0xFF << 8 * lane)
    return out


@dataclass
class Scenario:
    data_width: int = 256
    seed: int = 1                 # stimulus randomness (packet lengths, data, timing)
    max_beats: int = 4            # packets are 1..max_beats beats long
    model: DropModule = field(default_factory=DropModule)   # the power-on state
    prog: list[tuple[int, int, int]] = field(default_factory=list)
    beats: list[int] = field(default_factory=list)
    expected_log: list[str] = field(default_factory=list)
    expected_out: list[int] = field(default_factory=list)
    packets_sent: int = 0
    bursts: list[tuple[int, int, list[int]]] = field(default_factory=list)  # (first, n, dropped)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.kw = self.data_width // 8

    # ---- register access: the model answers, the bench replays
    def write(self, offset: int, value: int, strb: int = 0xF) -> None:
        value &= MASK32
        resp = RESP_OKAY
        try:
            if strb == 0xF:
                self.model.write(offset, value)
            elif offset not in (0x00, 0x04, 0x08, 0x0C):
                raise ValueError(f"register 0x{offset:02X} is not writable")
            elif offset in (0x00, 0x08):
                # Single-bit-field registers live in byte lane 0; without it, no effect.
                if strb & 1:
                    self.model.write(offset, value)
            else:
                # Byte strobes merge lanes into the register's current value.
                self.model.write(offset, _merge(self.model.read(offset), value, strb))
        except ValueError:
            resp = RESP_SLVERR
        self.prog.append((OP_WRITE | (strb << 8), offset, value))
        self.expected_log.append(f"W {offset:08x} {resp:x}")

    def read(self, offset: int) -> int:
        """Queue a read; returns its position in the log (see Result.read_value)."""
        try:
            value, resp = self.model.read(offset), RESP_OKAY
        except ValueError:
            value, resp = 0, RESP_SLVERR
        self.prog.append((OP_READ, offset, 0))
        self.expected_log.append(f"R {offset:08x} {resp:x} {value:08x}")
        return len(self.expected_log) - 1

    def read_all(self) -> dict[int, int]:
        """Read the whole map; returns offset -> log position."""
        return {offset: self.read(offset) for offset in range(0, 0x20, 4)}

    def idle(self, cycles: int) -> None:
        self.prog.append((OP_IDLE, 0, cycles))

    def reset(self) -> None:
        """Pulse axi_resetn while the stream is idle."""
        self.model.reset()
        self.prog.append((OP_RESET, 0, 0))

    # ---- traffic
    def _packet_beats(self, index: int) -> list[int]:
        dw, kw = self.data_width, self.kw
        n = self.rng.randint(1, self.max_beats)
        out = []
        for b in range(n):
            data = self.rng.getrandbits(dw)
            if b == 0:
                # Packet identity in the low 32 bits of the first beat.
                data = (data & ~MASK32) | (index & MASK32)
            last = b == n - 1
            keep = ((1 << self.rng.randint(1, kw)) - 1) if last else (1 << kw) - 1
            user = self.rng.getrandbits(UW)
            out.append(int(last) << (UW + kw + dw) | user << (kw + dw) | keep << dw | data)
        return out

    def stream(self, n: int) -> list[int]:
        """Send n packets; returns the indices (within this burst) the model drops."""
        dropped = []
        for i in range(n):
            beats = self._packet_beats(self.packets_sent + i)
            self.beats.extend(beats)
            if self.model.packet():
                dropped.append(i)
            else:
                self.expected_out.extend(beats)
        self.bursts.append((self.packets_sent, n, dropped))
        self.packets_sent += n
        self.prog.append((OP_STREAM, 0, n))
        self.expected_log.append(f"S {n}")
        return dropped

    # ---- files
    def beat_hex_digits(self) -> int:
        return (1 + UW + self.kw + self.data_width + 3) // 4

    def write_files(self, work: Path) -> dict[str, Path]:
        work.mkdir(parents=True, exist_ok=True)
        files = {k: work / f"{k}.hex" for k in ("prog", "beats")}
        files |= {"out": work / "out.hex", "log": work / "log.txt"}
        with files["prog"].open("w") as f:
            for op, addr, data in self.prog + [(OP_END, 0, 0)]:
                f.write(f"{op:08x}{addr:08x}{data:08x}\n")
        digits = self.beat_hex_digits()
        with files["beats"].open("w") as f:
            f.write("".join(f"{b:0{digits}x}\n" for b in self.beats) or "0\n")
        return files


@dataclass
class Result:
    log: list[str]
    out: list[int]
    errors: int
    cycles: int
    stdout: str

    def read_value(self, position: int) -> int:
        """Data of the read the DUT answered at this log position (OKAY required)."""
        kind, _, resp, data = self.log[position].split()
        assert kind == "R" and resp == "0", self.log[position]
        return int(data, 16)

    def packet_ids(self, data_width: int) -> list[int]:
        """The packet index carried by the first beat of every forwarded packet."""
        ids, first = [], True
        for beat in self.out:
            if first:
                ids.append(beat & MASK32)
            first = bool(beat >> (UW + data_width // 8 + data_width) & 1)
        return ids


def run(scn: Scenario, image: Path, work: Path, *, valid_pct: int = 70,
        ready_pct: int = 70, timeout: float = 300) -> Result:
    if len(scn.beats) > 65536 or len(scn.prog) >= 4096:
        raise ValueError("scenario exceeds the bench's MAXBEATS/MAXPROG")
    files = scn.write_files(work)
    proc = subprocess.run(
        ["vvp", "-n", str(image), f"+prog={files['prog']}", f"+beats={files['beats']}",
         f"+out={files['out']}", f"+log={files['log']}", f"+seed={scn.seed}",
         f"+valid_pct={valid_pct}", f"+ready_pct={ready_pct}"],
        capture_output=True, text=True, timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vvp failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    stats = dict(line.split(None, 1) for line in proc.stdout.splitlines()
                 if line.startswith(("CYCLES ", "ERRORS ")))
    if "ERRORS" not in stats:
        raise RuntimeError(f"simulation did not finish cleanly:\n{proc.stdout}\n{proc.stderr}")
    log = files["log"].read_text().split("\n")[:-1]
    out = [int(x, 16) for x in files["out"].read_text().split()]
    return Result(log=log, out=out, errors=int(stats["ERRORS"]),
                  cycles=int(stats["CYCLES"]), stdout=proc.stdout)
