"""Macros, Tables I and II: generated, complete, and the manuscript types no numbers."""
import json
import re
from collections import Counter

import pytest

from tcpeval import paths, spec
from tcpeval.analysis import tables
from tcpeval.cli import main
from tcpeval.report import latex, macros
from tcpeval.spec import REPO_ROOT as REPO


def _used_macros(tex: str):
    named = set(re.findall(r"\\(tev[A-Za-z]+)", tex)) - {"tevdef"}
    keyed = set(re.findall(r"\\tev\{([^}]*)\}", tex))
    return named, keyed


def test_every_macro_the_manuscript_uses_is_defined(smoke_results, design):
    ds = tables.load(smoke_results, design, "smoke", "emulated")
    m = macros.build(ds, design, "smoke", "emulated", verdicts=[], revision="abc123")
    main_tex = (REPO / "paper" / "main.tex").read_text()
    named, keyed = _used_macros(main_tex)
    assert named - {"tev"} <= set(m.named), named - set(m.named)
    assert keyed <= set(m.keyed), keyed - set(m.keyed)
    # values come from the data: cell of a present run
    one = ds.criterion("responsiveness").iloc[0]
    key = f"resp/{one['variant']}/{paths.format_rtt(one['rtt_ms'])}/{paths.format_drop(one['drop'])}/mean"
    assert m.keyed[key] == f"{one['mean_bps'] / 1e9:.2f}"
    assert m.named["tevCampaign"] == "smoke" and m.named["tevAnalysisRevision"] == "abc123"
    assert m.named["tevDropMechanism"] == "synthetic" and "synthetic" in m.named["tevDataWarning"]
    assert int(m.named["tevNUsed"]) == len(ds.runs)


def test_manuscript_prose_has_no_typed_numbers():
    text = (REPO / "paper" / "main.tex").read_text()
    body = text.split("\\begin{document}")[1].split("\\begin{thebibliography}")[0]
    body = re.sub(r"(?<!\\)%.*", "", body)
    body = re.sub(r"\$[^$]*\$", "", body)                       # definitions in formulas
    body = re.sub(r"\\(tev|ref|label|input|cite|texttt)\{[^}]*\}", "", body)
    body = re.sub(r"\[[0-9.]+(pt|cm)\]", "", body)
    body = body.replace("Linux~3.16", "")                          # a kernel's name
    assert not re.findall(r"\d", body), re.findall(r".{30}\d.{10}", body)


def test_the_run_lengths_sentence_says_what_the_design_expands_to(design):
    # one fixed length, with the criterion that differs named
    assert macros._durations(spec.expand(design, "smoke")) == "4\\,s (convergence: 8\\,s)"
    # a loss-event rule gives a range (validation: 100 events, 20 s at least, 884 s at 24.2 ms, 1e-5)
    assert macros._durations(spec.expand(design, "validation")) == "20--884\\,s"
    # precision-driven runs last at most their length: the findings' responsiveness runs
    # (30 s without loss up to the longest the budget runs), the low-loss slice's 5 min
    longest = max(r.duration_s for r in spec.expand(design, "findings", criteria=["responsiveness"]))
    assert macros._durations(spec.expand(design, "findings")) == f"60\\,s (responsiveness: at most 30--{longest:g}\\,s)"
    assert macros._durations(spec.expand(design, "findings-low-loss")) == "at most 300\\,s"


def test_macro_file_syntax(smoke_results, design, tmp_path):
    out = tmp_path / "macros.tex"
    assert main(["macros", "--results", str(smoke_results), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.count("{") == text.count("}")
    assert "\\tevdef{resp/" in text and "\\renewcommand\\tevCampaign{smoke}" in text
    with pytest.raises(ValueError):
        latex.Macros().name("tev1", 1)


def test_table1_from_cc_params_json(cc_params_file, cc_params_fixture, tmp_path):
    out = tmp_path / "t1.tex"
    assert main(["table", "table1", "--cc-params", str(cc_params_file), "--out", str(out)]) == 0
    text = out.read_text()
    for variant in cc_params_fixture:
        assert tables.VARIANT_LABELS[variant] in text
    assert "\\texttt{ai\\_cnt}~$=$~50" in text and "1e-7" in text


def _rows(tex: str) -> list[list[str]]:
    """The body rows of a booktabs table (between \\midrule lines), split into cells."""
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule")[0]
    rows = []
    for line in body.splitlines():
        line = line.strip()
        if line.endswith("\\\\"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)&", line[:-2])])
    return rows


def test_table1_cells_are_the_parameters_the_c_sources_declare():
    cc = pytest.importorskip("tcpeval.cc")
    params = cc.parameters()
    rows = {cells[0]: cells[1] for cells in _rows(latex.table1(json.loads(json.dumps(params)),
                                                                 tables.VARIANT_LABELS))}
    # the labelled (paper's) variants first, then the other ports under their own names
    others = sorted(v for v in params if v not in tables.VARIANT_LABELS)
    labels = {**tables.VARIANT_LABELS, **{v: v for v in others}}
    assert list(rows) == [latex.escape(labels[v]) for v in [*tables.VARIANT_LABELS, *others]]
    for variant, label in labels.items():
        cell = dict(re.findall(r"\\texttt\{([^}]*)\}~\$=\$~([^,]+)", rows[latex.escape(label)]))
        assert cell == {latex.escape(name): latex.escape(str(p["value"])) for name, p in params[variant].items()}
    # the values the original study's Table I gives, as the sources declare them
    assert "\\texttt{beta}~$=$~717" in rows["CUBIC"] and "\\texttt{beta}~$=$~819" in rows["BIC"]
    assert "\\texttt{ai\\_cnt}~$=$~50" in rows["Scalable"]


def test_table2_cells_are_the_designs_levels_and_run_counts(smoke_results, design, tmp_path):
    out = tmp_path / "t2.tex"
    assert main(["table", "table2", "--results", str(smoke_results), "--out", str(out)]) == 0
    rows = {cells[0]: cells for cells in _rows(out.read_text())}
    paper_runs = spec.expand(design, "paper", "emulated")
    smoke = Counter(c.criterion for c in spec.expand(design, "smoke", "emulated"))
    used = Counter(tables.load(smoke_results, design, "smoke", "emulated").runs["criterion"])
    for criterion in ("responsiveness", "fairness", "compatibility", "convergence"):
        name = tables.CRITERION_LABELS[criterion] + (" \\& efficiency" if criterion == "responsiveness" else "")
        cells = rows[name]
        conds = [c for c in paper_runs if c.criterion == criterion]
        assert cells[3:] == [str(len(conds)), str(smoke[criterion]), str(used[criterion])], criterion
        rtts = ", ".join(paths.format_rtt(r) for r in sorted({c.rtt_ms for c in conds}))
        drops = ", ".join(latex.fmt_drop(d) for d in sorted({c.drop for c in conds}))
        assert f"RTT [ms]: {rtts}" in cells[2] and f"drop: {drops}" in cells[2], cells[2]
    assert rows["$\\Sigma$"][3:] == ["1,280", str(sum(smoke.values())), str(sum(used.values()))]
    assert sum(used.values()) < sum(smoke.values())  # flagged runs are not used


def test_number_formats():
    assert latex.fmt_drop(1e-5) == "$10^{-5}$" and latex.fmt_drop(2.5e-5) == "$2.5\\times10^{-5}$"
    assert latex.fmt_drop(0) == "0" and latex.fmt_drop(1e-4, tex=False) == "1e-4"
    assert latex.gbps(float("nan")) == "n/a" and latex.gbps(9.41e9) == "9.41"
    assert latex.escape("a_b&c%") == "a\\_b\\&c\\%"
