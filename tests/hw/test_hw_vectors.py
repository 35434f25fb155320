"""The committed drop-module vectors (hw/dropper/vectors) still equal the model, and the
model's generator is the published xorshift32. No simulator needed."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tcpeval import drop_model

HW = Path(__file__).resolve().parents[2] / "hw" / "dropper"


def load_gen():
    spec = importlib.util.spec_from_file_location("gen_vectors", HW / "gen_vectors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_vectors_match_model(capsys):
    gen = load_gen()
    assert gen.main(["--check", "--out", str(HW / "vectors")]) == 0, capsys.readouterr().err
    expected = gen.expected_files()
    assert len(expected) == len(gen.SEEDS) + 1
    for name in expected:
        assert (HW / "vectors" / name).exists()


def test_check_detects_drift(tmp_path):
    gen = load_gen()
    assert gen.main(["--out", str(tmp_path)]) == 0
    path = tmp_path / "xorshift32_seed00000001.hex"
    lines = path.read_text().splitlines()
    lines[5] = f"{int(lines[5], 16) ^ 1:08x}"
    path.write_text("\n".join(lines) + "\n")
    assert gen.main(["--check", "--out", str(tmp_path)]) == 1


def test_xorshift32_known_answers():
    # Independent of this repository: the 13/17/5 generator from state 1, and the
    # first output of Marsaglia's (2003) xor32 example seed.
    s, out = 1, []
    for _ in range(5):
        s = drop_model.xorshift32(s)
        out.append(s)
    assert out == [270369, 67634689, 2647435461, 307599695, 2398689233]
    assert drop_model.xorshift32(2463534242) == 723471715


def test_vector_files_are_readmemh_clean():
    # One comment line, then exactly DRAWS 8-digit words: what $readmemh and the BPF
    # tests expect.
    gen = load_gen()
    for seed in gen.SEEDS:
        lines = (HW / "vectors" / f"xorshift32_seed{seed:08x}.hex").read_text().splitlines()
        assert lines[0].startswith("//")
        words = lines[1:]
        assert len(words) == gen.DRAWS and all(len(w) == 8 for w in words)
        assert int(words[0], 16) == drop_model.xorshift32(drop_model.effective_seed(seed))
    doc = json.loads((HW / "vectors" / "drops.json").read_text())
    for case in doc["cases"]:
        assert case["dropped"] == len(case["dropped_indices"]) <= case["packets"]


def test_model_reset_equals_power_on():
    m = drop_model.DropModule.for_probability(0.3, seed=77)
    m.write(drop_model.REG_CONTROL, 0)
    m.drop_indices(10)
    m.reset()
    fresh = drop_model.DropModule()
    assert (m.threshold, m.seed, m.enabled, m.state, m.seen, m.dropped) == (
        fresh.threshold, fresh.seed, fresh.enabled, fresh.state, fresh.seen, fresh.dropped)
    assert (fresh.threshold, fresh.seed, fresh.enabled) == (
        drop_model.RESET_THRESHOLD, drop_model.RESET_SEED, drop_model.RESET_ENABLED)
