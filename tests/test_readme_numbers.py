"""The findings' tables (Tables 1-2, ours beside the paper's; docs/findings.md, "The tables") are
copied from the rendered `results/table*.csv`; this catches prose left behind when the reference
gains seeds. Every number of the findings appears in a source, and the README's prose numbers in the
findings or the tables."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# README header cell -> rendered CSV column, for each table's file.
TABLES = {
    "table1_sentihood.csv": {"Strict acc": "aspect_strict_acc", "Macro-F1": "aspect_macro_f1",
                             "Aspect AUC": "aspect_auc", "Sent. acc": "sentiment_acc",
                             "Sent. AUC": "sentiment_auc"},
    "table2_semeval.csv": {"P": "aspect_p", "R": "aspect_r", "F1": "aspect_f1",
                           "Binary": "sentiment_acc_binary", "3-class": "sentiment_acc_3class",
                           "4-class": "sentiment_acc_4class"},
}
CELL = re.compile(r"^(?P<mean>–|-?\d+(?:\.\d+)?)(?: ± (?P<sd>\d+(?:\.\d+)?))?(?: \[(?P<paper>\d+(?:\.\d+)?)\])?$")


def _status_tables(findings: str) -> list[list[list[str]]]:
    """The tables of the findings' "The tables" section whose header starts `| model | budget | seeds |`."""
    section = findings.split("## The tables", 1)[1].split("\n## ", 1)[0]
    tables, current = [], None
    for line in section.splitlines():
        if line.startswith("| model | budget | seeds |"):
            current = [[c.strip() for c in line.strip("|").split("|")]]
            tables.append(current)
        elif current is not None and line.startswith("|"):
            if not set(line) <= set("|-: "):
                current.append([c.strip() for c in line.strip("|").split("|")])
        else:
            current = None
    return tables


def _same(readme_cell: str, value: str) -> bool:
    """`value` (a CSV float, or empty) printed with the README cell's number of decimals."""
    if readme_cell == "–":
        return value == ""
    digits = len(readme_cell.split(".")[1]) if "." in readme_cell else 0
    return value != "" and f"{float(value):.{digits}f}" == readme_cell


def _budget(csv_row: dict) -> str:
    """The README's budget cell of a rendered row (absa_lib.reports.tables.budget_label): `minilm, 25 epochs`."""
    return csv_row["budget"] if csv_row["source"] == "ours" else "–"


def _check(header: list[str], row: list[str], csv_rows: list[dict], columns: dict) -> list[str]:
    model, budget, seeds, cells = row[0], row[1], row[2], row[3:]
    matches = [r for r in csv_rows if r["model"] == model and r["source"] in ("ours", "trivial")
               and r["selection"] in ("dev_best", "") and _budget(r) == budget]
    if len(matches) != 1:
        return [f"README row {model!r} ({budget}): {len(matches)} dev-best rows in the CSV, expected 1"]
    ref, wrong = matches[0], []
    if ref["source"] == "ours" and seeds != ref["n_seeds"]:
        wrong.append(f"{model}: seeds {seeds} in the README, {ref['n_seeds']} rendered")
    for name, cell in zip(header[3:], cells, strict=True):
        m = CELL.match(cell)
        if m is None:
            wrong.append(f"{model} / {name}: cannot read {cell!r}")
            continue
        col = columns[name]
        for part, key in (("mean", col), ("sd", col + "_sd"), ("paper", col + "_paper")):
            if m[part] is not None and not _same(m[part], ref.get(key, "")):
                wrong.append(f"{model} / {name} {part}: README {m[part]}, rendered {ref.get(key)!r}")
    return wrong


def test_readme_status_tables_match_the_rendered_results():
    tables = _status_tables((ROOT / "docs" / "findings.md").read_text(encoding="utf-8"))
    found = {}
    for table in tables:
        header = table[0]
        name = next((f for f, cols in TABLES.items() if set(header[3:]) == set(cols)), None)
        if name is not None:
            found[name] = table
    assert set(found) == set(TABLES), f"findings tables found: {sorted(found)}"
    wrong = []
    for name, table in found.items():
        with open(ROOT / "results" / name, newline="", encoding="utf-8") as f:
            csv_rows = list(csv.DictReader(f))
        n_ours = sum(r["source"] == "ours" and r["selection"] == "dev_best" for r in csv_rows)
        assert len(table) - 1 >= n_ours, f"{name}: the findings show fewer rows than the {n_ours} rendered"
        for row in table[1:]:
            wrong += _check(table[0], row, csv_rows, TABLES[name])
    assert not wrong, "the findings' tables differ from results/: " + "; ".join(wrong[:10])


@pytest.mark.parametrize("cell,value,same", [("71.2", "71.23", True), ("71.2", "71.26", False),
                                             ("–", "", True), ("0.0", "", False)])
def test_cell_comparison(cell, value, same):
    assert _same(cell, value) is same


# docs/findings.md copies its numbers from the committed tables and the evidence pages (docs/results.md,
# docs/evidence/), and the README its numbers from those and the findings; neither computes numbers of
# its own or rounds any differently.
NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?!\w)")
FINDINGS = ROOT / "docs" / "findings.md"


def _sources() -> list[Path]:
    return [ROOT / "docs" / "results.md", *sorted((ROOT / "docs" / "evidence").glob("*.md")),
            *sorted((ROOT / "results").glob("*.md"))]


def test_every_number_of_the_findings_is_one_the_evidence_states():
    known = set()
    for path in _sources():
        known.update(NUMBER.findall(path.read_text(encoding="utf-8")))
    wrong = [f"docs/findings.md:{i}: {n}" for i, line in enumerate(FINDINGS.read_text(encoding="utf-8").splitlines(), 1)
             for n in NUMBER.findall(line) if n not in known]
    assert not wrong, "numbers in the findings that no table, README line or evidence page states: " + "; ".join(wrong)


@pytest.mark.parametrize("text,numbers", [("75.4 ± 0.4 vs 87.61; 42–44", ["75.4", "0.4", "87.61", "42", "44"]),
                                          ("run bc949283ced2, fig3, 587e9ebe", []),
                                          ("1,064 s, 10⁻³, 2.50×.", ["1,064", "10", "2.50"])])
def test_number_tokens(text, numbers):
    assert NUMBER.findall(text) == numbers


def test_every_number_of_the_readme_is_one_the_findings_or_the_evidence_state():
    """The README's prose (code blocks, the citation and command lines aside) states only numbers the
    findings, the tables or the evidence state: a README number cannot drift from the records."""
    known = set()
    for path in [FINDINGS, *_sources()]:
        known.update(NUMBER.findall(path.read_text(encoding="utf-8")))
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"```.*?```", "", text.split("## Citation and license")[0], flags=re.S)
    prose = re.sub(r"`[^`]*`", "", prose)                  # commands, paths, options
    wrong = sorted({n for n in NUMBER.findall(prose) if n not in known})
    assert not wrong, "README numbers that neither the findings, the tables nor the evidence state: " + ", ".join(wrong)


# A verdict in the prose is a verdict in the claims table: a sentence of the findings or of the README's
# "What we found" that says one model is better or worse than another (without a hedge such as "not" or
# "undecided") must name a claim that results/claims.csv decides; "undecided at N seeds" must be a verdict
# the table gives.
WINNER = re.compile(r"\b(better|worse|beats?|outperforms?|superior|inferior)\b", re.I)
HEDGE = re.compile(r"\b(not|no|neither|nor|never|cannot|undecided|whether)\b", re.I)


def _prose_sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)                # link targets
    return [s.strip() for s in re.split(r"(?<=[.!?;:])\s+|\n\n", text) if s.strip()]


def _unsupported_verdicts(text: str, rows: list[dict]) -> list[str]:
    decided = {r["claim"] for r in rows if r["verdict"] in ("A better", "B better")}
    given = {r["verdict"] for r in rows}
    wrong = []
    for sentence in _prose_sentences(text):
        if WINNER.search(sentence) and not HEDGE.search(sentence) and not any(c in sentence for c in decided):
            wrong.append(sentence)
        wrong += [sentence for n in re.findall(r"undecided at (\d+) seeds", sentence)
                  if f"undecided at {n} seeds" not in given]
    return wrong


def test_a_verdict_in_the_prose_is_one_the_claims_table_gives():
    with open(ROOT / "results" / "claims.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = readme.split("## What we found", 1)[1].split("\n## ", 1)[0]
    wrong = _unsupported_verdicts(found + "\n\n" + FINDINGS.read_text(encoding="utf-8"), rows)
    assert not wrong, "verdicts in the prose that results/claims.csv does not give: " + " | ".join(wrong)


@pytest.mark.parametrize(("sentence", "flagged"), [
    ("On SemEval QACG-BERT with auxiliary sentences is better than BERT-pair.", True),
    ("QACG-BERT is not better than BERT-pair.", False),
    ("every claim is undecided at 3 seeds.", False),
    ("every claim is undecided at 5 seeds.", True),
    ("BERT-pair over BERT-single is better on SentiHood.", False),
])
def test_the_verdict_check(sentence, flagged):
    rows = [{"claim": "BERT-pair over BERT-single", "verdict": "A better"},
            {"claim": "QACG-BERT over BERT-pair (auxiliary sentences)", "verdict": "undecided at 3 seeds"}]
    assert bool(_unsupported_verdicts(sentence, rows)) is flagged


def test_the_readme_s_share_of_a_quasi_near_one_half_is_what_notebook_05_prints_from_its_records():
    """The README's "76% of A_quasi lies within 0.02 of ½" is computed by notebook 05 from the Figure 4
    arrays it uses (results/reference/analysis/fig4_histograms.json) and printed there (issue 87)."""
    import json

    from absa_lib.reports.figure_data import share_near

    fig4 = json.loads((ROOT / "results" / "reference" / "analysis" / "fig4_histograms.json").read_text())["data"]
    share = f"{share_near(fig4['histograms']['a_quasi']):.0%}"
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"{share} of A_quasi lies within 0.02 of ½" in readme
    executed = json.loads((ROOT / "notebooks" / "executed" / "05_figures.ipynb").read_text(encoding="utf-8"))
    printed = ["".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", [])
               if "A_quasi within 0.02 of ½" in "".join(o.get("text", ""))]
    assert len(printed) == 1 and f"near σ(0)): {share} of its" in printed[0], printed


def test_share_near_counts_the_bins_wholly_inside():
    from absa_lib.reports.figure_data import share_near

    h = {"edges": [0.44, 0.46, 0.48, 0.5, 0.52, 0.54], "counts": [1, 2, 3, 4, 5], "n": 20}
    assert share_near(h) == (3 + 4) / 20 and share_near({**h, "n": 0}) == 0.0

