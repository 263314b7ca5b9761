"""`absa summary`: the committed 25-epoch CPU checks summarised as the docs quote them, the reference
as Tables 1-2 show it, seeds of one configuration averaged, copies of one run and runs of other
weights kept apart, unfinished runs named and not counted, and one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import with_record

from absa_lib.cli import main
from absa_lib.reports.summary import summarize

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference"
CHECKS = REFERENCE / "checks"


def row(text: str, start: str, block: int = 0, dataset: str = "") -> list[str]:
    """The cells of the Markdown row starting with ``start`` in the ``block``-th selection block (of
    the first dataset, or of the one whose title starts with ``dataset``)."""
    part = next(p for p in text.split("\n# ") if p.lstrip("# ").startswith(dataset))
    section = part.split("## Selection: ")[1 + block]
    lines = [line for line in section.splitlines() if line.startswith(f"| {start} |")]
    assert len(lines) == 1, (start, lines)
    return [c.strip() for c in lines[0].strip("|").split("|")]


def copy_run(source: Path, dest: Path) -> Path:
    return shutil.copytree(source, dest / source.name)


def test_two_seeds_are_one_row_at_the_dev_selected_epochs_as_the_docs_quote_them(real_data_dir):
    # docs/results.md: MAN-BERT on SemEval, seeds 42 and 43 on this CPU: F1 89.29, 4-class 81.6 ± 0.7
    text, frame = summarize(CHECKS / "other_bert_25ep_cpu", data_dir=real_data_dir)
    cells = row(text, "man-bert (no aux) (paper), minilm, 25 epochs")
    assert cells[1:3] == ["42 43", "15 16"]
    assert cells[3:] == ["91.20 ± 0.03", "87.46 ± 1.86", "89.29", "91.4 ± 0.4", "85.0 ± 0.7", "81.6 ± 0.7"]
    assert text.index("dev-best (default") < text.index("test-best (official code's protocol")
    # the test-selected block: the same runs at the epochs the test set chose, labelled as such
    assert row(text, "man-bert (no aux) (paper), minilm, 25 epochs", block=1)[1:3] == ["42 43", "20 16"]
    assert row(text, "All-none (trivial)")[3:6] == ["0.00", "0.00", "0.00"]
    man = frame[(frame["row"].str.startswith("man-bert")) & (frame["selection"] == "dev_best")].iloc[0]
    assert man["n_seeds"] == 2 and man["run_ids"] == "c8862a4bae21 7052b7ba7a0a"
    assert man["aspect_f1"] == pytest.approx(89.29, abs=0.005)


def test_three_seeds_from_two_folders_and_a_run_found_twice_counted_once(real_data_dir):
    # docs/results.md: MAN-BERT's three seeds, 42 and 43 in one check folder, 44 in another
    man = "man-bert (no aux) (paper), minilm, 25 epochs"
    text, _ = summarize([CHECKS / "other_bert_25ep_cpu", CHECKS / "other_bert_more_seeds_cpu"], ("dev_best",),
                        data_dir=real_data_dir)
    cells = row(text, man)
    assert cells[1:3] == ["42 43 44", "15 16 20"]
    assert cells[3:] == ["90.95 ± 0.43", "87.90 ± 1.52", "89.40", "91.8 ± 0.7", "85.5 ± 1.0", "82.1 ± 1.0"]
    nested, _ = summarize([CHECKS, CHECKS / "other_bert_25ep_cpu"], ("dev_best",), data_dir=real_data_dir)
    assert row(nested, man, dataset="SemEval") == cells                # SentiHood comes first
    # and OA-BERT with the context id, seeds 42 and 43 (docs/results.md)
    oa = row(text, "oa-bert (no aux) (paper), minilm, 25 epochs")
    assert oa[1:3] == ["42 43", "6 25"]
    assert oa[3:] == ["91.14 ± 0.27", "86.83 ± 2.21", "88.93", "91.7 ± 0.5", "85.8 ± 0.4", "82.4 ± 0.5"]
    # and with the auxiliary sentence, seeds 42 and 43 (one in each folder)
    aux = row(text, "oa-bert NLI-M (paper), minilm, 25 epochs")
    assert aux[1:3] == ["42 43", "18 24"]
    assert aux[3:] == ["89.94 ± 1.59", "87.95 ± 0.62", "88.94", "90.7 ± 0.0", "85.1 ± 0.1", "80.8 ± 0.6"]


def test_the_papers_printed_gate_vectors_and_head_as_docs_results_quotes_them(real_data_dir):
    # docs/results.md, one-epoch CPU runs: per-head λ vectors and §3.5's head beside their baseline,
    # whose seed 42 is the bf16 twin of the table cell (another check folder)
    text, _ = summarize([CHECKS / "paper_heads_cpu", CHECKS / "cpu_profile_bf16"], ("dev_best",),
                        data_dir=real_data_dir)
    base = row(text, "qacg-bert NLI-M (paper), minilm, 1 epoch")
    per_head = row(text, "qacg-bert NLI-M lambda_per_head=True (paper), minilm, 1 epoch")
    head = row(text, "qacg-bert NLI-M pooling=cls_state (paper), minilm, 1 epoch")
    assert [base[1], per_head[1], head[1]] == ["42 43 44"] * 3
    assert base[3:] == ["65.3 ± 0.4", "66.0 ± 4.9", "93.6 ± 0.6", "82.7 ± 1.9", "86.2 ± 3.3"]
    assert per_head[3:] == ["64.2 ± 2.4", "65.3 ± 10.5", "93.3 ± 1.0", "82.0 ± 4.5", "86.7 ± 3.6"]
    assert head[3:] == ["66.4 ± 0.6", "66.4 ± 4.6", "94.0 ± 0.2", "84.2 ± 1.0", "88.5 ± 0.8"]
    both = row(text, "qacg-bert NLI-M lambda_per_head=True pooling=cls_state (paper), minilm, 1 epoch")
    assert both[1] == "42 43 44"
    assert both[3:] == ["64.4 ± 0.8", "63.6 ± 3.6", "93.1 ± 0.9", "83.9 ± 1.3", "88.3 ± 0.8"]


def test_one_run_retrained_elsewhere_is_two_rows_not_two_seeds(tmp_path, real_data_dir):
    # the same configuration (run id) trained on two CPUs: a row per copy, named by its folder
    first, second = CHECKS / "fp32_other_cpu", CHECKS / "fp32_other_cpu_isa_avx2"
    run_id = sorted(p.name for p in first.iterdir() if (second / p.name / "config.json").is_file())[0]
    copy_run(first / run_id, tmp_path / "a")
    copy_run(second / run_id, tmp_path / "b")
    text, frame = summarize(tmp_path, ("dev_best",), data_dir=real_data_dir)
    ours = frame[frame["source"] == "ours"]
    assert len(ours) == 2 and list(ours["n_seeds"]) == [1, 1]
    assert [r.endswith(f"[folder={tmp_path / n}]") for r, n in zip(ours["row"], "ab", strict=True)] == [True, True]


def test_other_backbone_weights_are_another_row_named_by_the_field(tmp_path, real_data_dir):
    # joint-dwa seed 43 on the float16 copy of MiniLM and on its original weights (docs/results.md)
    copy_run(CHECKS / "joint_dwa_43_cpu" / "4dd17c700df6", tmp_path / "runs")
    copy_run(CHECKS / "minilm_files_f9bd" / "5e361be06ea7", tmp_path / "runs")
    text, frame = summarize(tmp_path / "runs", ("dev_best",), data_dir=real_data_dir)
    name = "qacg-bert (no aux) joint-dwa (paper), minilm, 25 epochs"
    assert row(text, f"{name} [backbone_fingerprint=587e9ebe000b7363]")[1:3] == ["43", "19"]
    assert row(text, f"{name} [backbone_fingerprint=f9bd6085d3165343]")[1] == "43"


def test_rows_on_other_data_are_named_by_the_files_that_differ(tmp_path):
    # your own data edited between two runs: the whole checksum mapping made a name of ~400 characters

    from absa_lib.reports.summary import group_runs
    from absa_lib.training.records import load_run

    run = load_run(CHECKS / "joint_dwa_43_cpu" / "4dd17c700df6")
    sums = run.config.data_sha256
    edited = {**sums, sorted(sums)[0]: "ab" * 32}
    other = with_record(run, data_sha256=edited, run_id="x")
    names = sorted(group_runs([run, other]))
    key = sorted(sums)[0]
    assert names == sorted(f"qacg-bert (no aux) joint-dwa (paper), minilm, 25 epochs [data_sha256.{key}={v[:12]}]"
                           for v in (sums[key], "ab" * 32))


def test_a_run_still_training_is_named_and_not_counted(tmp_path, real_data_dir):
    run = copy_run(CHECKS / "joint_dwa_43_cpu" / "4dd17c700df6", tmp_path / "runs")
    metrics = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({"epochs": metrics["epochs"][:7]}))       # stopped
    text, frame = summarize(tmp_path / "runs", data_dir=real_data_dir)
    assert frame.empty and "## Selection" not in text
    assert f"- {run} (7 of 25 epochs)" in text.splitlines()
    copy_run(CHECKS / "other_bert_25ep_cpu" / "c8862a4bae21", tmp_path / "runs")
    text, frame = summarize(tmp_path / "runs", data_dir=real_data_dir)
    assert list(frame.loc[frame["source"] == "ours", "run_ids"]) == ["c8862a4bae21"] * 2
    assert f"- {run} (7 of 25 epochs)" in text.splitlines()


def test_without_the_data_the_trivial_rows_are_missing_with_the_reason(tmp_path):
    text, frame = summarize(CHECKS / "other_bert_25ep_cpu", ("dev_best",), data_dir=tmp_path)
    assert "trivial" not in set(frame["source"])
    assert "_Trivial rows not shown: " in text and str(tmp_path) in text


def test_sentihood_comes_before_semeval_as_in_the_paper(real_data_dir):
    text, frame = summarize([CHECKS / "joint_dwa_43_cpu", CHECKS / "group_by_length"], ("dev_best",),
                            data_dir=real_data_dir)               # folders given SemEval first
    titles = [line for line in text.splitlines() if line.startswith("# ")]
    assert [t.split(":")[0] for t in titles] == ["# SentiHood", "# SemEval-2014"]
    assert list(dict.fromkeys(frame["dataset"])) == ["sentihood", "semeval"]


def test_the_cli_prints_writes_the_csv_and_refuses_a_bad_folder(tmp_path, real_data_dir, capsys):
    out = tmp_path / "summary.csv"
    assert main(["summary", str(CHECKS / "other_bert_25ep_cpu"), "--selection", "test_best",
                 "--data-dir", str(real_data_dir), "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "## Selection: test-best" in printed and "dev-best" not in printed
    header = out.read_text().splitlines()[0].split(",")
    assert header[:4] == ["dataset", "row", "source", "selection"] and "aspect_f1_sd" in header
    assert main(["summary", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip().endswith("not a folder; give the folder that `absa train --out` wrote to")
    (tmp_path / "empty").mkdir()
    assert main(["summary", str(tmp_path / "empty")]) == 2
    assert "no run records below it" in capsys.readouterr().err
    run = copy_run(CHECKS / "joint_dwa_43_cpu" / "4dd17c700df6", tmp_path / "damaged")
    (run / "metrics.json").write_text("[1, 2]")                             # valid JSON, not a record
    assert main(["summary", str(tmp_path / "damaged")]) == 2
    assert capsys.readouterr().err.strip() == (f"absa: error: {run / 'metrics.json'}: expected a JSON object, "
                                               "got list; delete the run folder or rerun with --force")


def test_the_summary_of_the_reference_agrees_with_tables_1_and_2():
    # the same runs, grouped by two code paths: every table row of ours is a summary row, same numbers
    # (both average through tables.aggregate_metrics; the row below is averaged here by hand)
    import statistics

    from absa_lib.reports.summary import summary_table
    from absa_lib.reports.tables import build_table, metric_columns
    from absa_lib.training.records import find_runs

    runs = find_runs(REFERENCE / "runs")
    for dataset in ("sentihood", "semeval"):
        table = build_table(dataset, runs)
        table = table[table["source"] == "ours"]
        summary = summary_table(dataset, runs).set_index(["run_ids", "selection"])
        assert len(table) >= 20
        for rec in table.to_dict("records"):
            mine = summary.loc[(rec["run_ids"], rec["selection"])]
            assert mine["n_seeds"] == rec["n_seeds"]
            for key, _, _ in metric_columns(dataset):
                assert mine[key] == pytest.approx(rec[key]) and mine[f"{key}_sd"] == pytest.approx(
                    rec[f"{key}_sd"], nan_ok=True)
        # one row from the metrics.json files themselves: the dev-selected test strict accuracy or P
        row = table[(table["n_seeds"] == 3) & (table["selection"] == "dev_best")].iloc[0]
        key = "aspect_strict_acc" if dataset == "sentihood" else "aspect_p"
        values = [100 * json.loads(next((REFERENCE / "runs").glob(f"{dataset}/*/{run_id}/metrics.json")).read_text())
                  ["selection"]["dev_best"]["test"][key] for run_id in row["run_ids"].split()]
        assert row[key] == pytest.approx(statistics.mean(values))
        assert row[f"{key}_sd"] == pytest.approx(statistics.stdev(values))


def test_a_run_folder_is_one_named_by_its_run_id_and_never_a_runs_checkpoint(tmp_path):
    from absa_lib.errors import AbsaError
    from absa_lib.training.records import find_runs

    run = copy_run(CHECKS / "joint_dwa_43_cpu" / "4dd17c700df6", tmp_path / "keep")
    leftover = run / "checkpoints" / "best.tmp"           # what a process killed while saving leaves
    leftover.mkdir(parents=True)
    (leftover / "config.json").write_text("{}")
    assert [r.path for r in find_runs(tmp_path / "keep")] == [run]      # the checkpoint's config is no run
    copy_run(CHECKS / "joint_dwa_43_cpu" / "4dd17c700df6", tmp_path / "other").rename(tmp_path / "other" / "best")
    with pytest.raises(AbsaError, match="best: the folder of run 4dd17c700df6 .* under another name"):
        find_runs(tmp_path / "other")                   # a run under another name: refused, never counted
    with pytest.raises(AbsaError, match="^find_runs: modle is not a field of a run's config"):
        find_runs(tmp_path / "keep", modle="qacg-bert")                # matched nothing, silently
    seed = json.loads((run / "config.json").read_text())["seed"]
    assert [r.path for r in find_runs(tmp_path / "keep", seed=seed, max_train_examples=None, lr=2e-5)] == [run]
    for name, value, kind in (("seed", str(seed), "an integer"), ("seed", True, "an integer"),
                              ("lr", "5e-5", "a number"), ("max_train_examples", "all", "an integer or None"),
                              ("group_by_length", 0, "true or false"), ("model_overrides", None, "a mapping")):
        with pytest.raises(AbsaError, match=f"^find_runs: {name}={value!r} can match no run; a run records its "
                           f"{name} as {kind}$"):                      # these matched nothing, silently
            find_runs(tmp_path / "keep", **{name: value})
