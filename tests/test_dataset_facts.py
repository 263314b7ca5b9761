"""Render without the raw benchmark files: the facts committed beside the reference runs
(results/reference/data/benchmarks.json) give the same counts, trivial rows and shown sentences as
the raw files, are refused when stale or edited, and are used only when the raw files are absent."""

from __future__ import annotations

import json
import shutil

import pytest

from absa_lib.data import datasets as D
from absa_lib.errors import AbsaError
from absa_lib.harness import run_all, session
from absa_lib.paths import repo_root
from absa_lib.reports import dataset_facts as B
from absa_lib.reports import tables
from absa_lib.training.records import find_runs

REFERENCE = repo_root() / "results" / "reference"
COMMITTED = REFERENCE / B.FACTS_FILE


@pytest.fixture(scope="module")
def both(real_data_dir):
    """The benchmarks read from the raw files and from the committed facts."""
    return B.Benchmarks(real_data_dir), B.Benchmarks(None, B.read_facts(COMMITTED))


@pytest.fixture
def reference(tmp_path):
    """A reference folder holding a copy of the committed facts, and an empty data folder."""
    (tmp_path / "ref" / "data").mkdir(parents=True)
    shutil.copy(COMMITTED, tmp_path / "ref" / B.FACTS_FILE)
    (tmp_path / "empty").mkdir()
    return tmp_path / "ref", tmp_path / "empty"


def test_the_committed_facts_are_what_the_raw_files_give_today(real_data_dir):
    """`absa data facts --check`: a change to a reader, the split or a trivial predictor shows here."""
    subsets = {r.config.max_eval_examples for r in find_runs(REFERENCE / "runs")}
    assert json.loads(COMMITTED.read_text()) == B.facts_from_raw(real_data_dir, subsets)


def test_the_facts_give_what_the_raw_files_give(both):
    raw, kept = both
    assert json.dumps(kept.stats()) == json.dumps(raw.stats())         # the same order of keys too
    for dataset in D.DATASETS:
        for split in D.SPLITS:
            assert kept.context_counts(dataset, split) == raw.context_counts(dataset, split)
        assert kept.shown(dataset, "test") == raw.shown(dataset, "test")
        assert repr(kept.trivial(dataset)) == repr(raw.trivial(dataset))
    assert [e.key for e in kept.shown("sentihood", "test")][:8] == \
        [e.key for e in D.load_examples("sentihood", "test")[:8]]


def test_a_table_from_the_facts_is_byte_for_byte_the_table_from_the_raw_files(both, tmp_path):
    raw, kept = both
    runs = find_runs(REFERENCE / "runs", dataset="semeval")
    for name, bench in (("raw", raw), ("kept", kept)):
        df = tables.build_table("semeval", runs, trivial=bench.trivial_of("semeval", runs))
        tables.write_table(df, tables.to_markdown(df, "semeval"), tmp_path / name, "t")
    for ext in ("csv", "md"):
        assert (tmp_path / "kept" / f"t.{ext}").read_bytes() == (tmp_path / "raw" / f"t.{ext}").read_bytes()
    assert "All-none (trivial)" in (tmp_path / "kept" / "t.md").read_text()


def test_the_facts_stand_in_only_when_every_raw_file_is_absent(reference, real_data_dir, tmp_path):
    ref, empty = reference
    bench = B.Benchmarks.open(empty, ref)
    assert not bench.raw and bench.line.startswith(f"[data] the raw benchmark files are not in {empty}: ")
    assert B.Benchmarks.open(real_data_dir, ref).raw                           # raw files there: they are read
    with pytest.raises(AbsaError, match="sentihood-train.json is missing"):
        B.Benchmarks.open(empty, tmp_path)                                   # no facts there: the raw files' error
    partial = tmp_path / "partial" / "sentihood"
    partial.mkdir(parents=True)
    (partial / "sentihood-train.json").write_text("[]")                     # one file, and a wrong one
    with pytest.raises(AbsaError, match="sentihood-train.json"):
        B.Benchmarks.open(tmp_path / "partial", ref)


def test_stale_edited_or_foreign_facts_are_refused_in_one_line(reference):
    ref, empty = reference
    path = ref / B.FACTS_FILE
    facts = json.loads(path.read_text())
    edited = json.loads(json.dumps(facts))
    edited["benchmarks"]["semeval"]["splits"]["test"]["sentences"] += 1
    stale = {**facts, "files": {**facts["files"], "sentihood/sentihood-test.json": "0" * 64}}
    for bad, message in ((edited, "does not match its content_sha256"), (stale, "other raw files than the pinned"),
                         ({**facts, "format": 9}, "not a benchmark facts file of format 1")):
        path.write_text(json.dumps(bad))
        with pytest.raises(AbsaError, match=message) as err:
            B.Benchmarks.open(empty, ref)
        assert "\n" not in str(err.value) and "absa data facts" in str(err.value)


def test_trivial_rows_of_a_test_subset_the_facts_do_not_hold_are_refused(both):
    _, kept = both
    with pytest.raises(AbsaError, match="for max_eval_examples all, not 123; give the raw files"):
        kept.trivial("sentihood", 123)


def test_render_s_data_step_downloads_nothing_when_the_facts_stand_in(reference, monkeypatch):
    ref, empty = reference
    monkeypatch.setattr(run_all, "download", lambda *a, **k: pytest.fail("render downloaded the raw files"))
    ok, lines = run_all.data_lines(str(empty), ref)
    assert ok and lines == [B.Benchmarks.open(empty, ref).line]
    (ref / B.FACTS_FILE).write_text("{}")
    ok, lines = run_all.data_lines(str(empty), ref)
    assert not ok and "not a benchmark facts file" in lines[0]


def test_a_notebook_that_draws_takes_the_facts_and_one_that_trains_fetches_the_files(reference, monkeypatch,
                                                                                    capsys, tmp_path):
    ref, empty = reference
    fetched = []
    monkeypatch.setattr(session, "ensure_data", fetched.append)
    common = {"profile": "render", "data_dir": str(empty), "reference_dir": str(ref)}
    nb = session.setup("01_data", {"__annotations__": dict.fromkeys(common, str), **common})
    assert not nb.benchmarks.raw and fetched == []
    assert nb.benchmarks.line in capsys.readouterr().out
    runs = tmp_path / "runs"
    trains = {**common, "profile": "cpu", "allow_training": True, "runs_dir": str(runs)}
    nb = session.setup("04_ablations", {"__annotations__": {**dict.fromkeys(trains, str), "allow_training": bool},
                                        **trains})
    assert fetched == [str(empty)] and nb.benchmarks.raw


def test_the_readme_and_the_guide_count_the_sentences_the_facts_keep(both):
    _, kept = both
    words = {5: "five", 6: "six", 7: "seven", 8: "eight"}
    n = len({(d, e.sentence_id) for d in D.DATASETS for e in kept.shown(d, "test")})
    for page in ("README.md", "docs/running.md"):
        assert f"{words[n]} sentences" in (repo_root() / page).read_text(), page


def test_a_drawing_notebook_refuses_stale_facts_rather_than_fetching_the_files(reference, monkeypatch):
    ref, empty = reference
    monkeypatch.setattr(session, "ensure_data", lambda data_dir: pytest.fail("the setup cell fetched the files"))
    (ref / B.FACTS_FILE).write_text(json.dumps({**json.loads((ref / B.FACTS_FILE).read_text()), "files": {}}))
    common = {"profile": "render", "data_dir": str(empty), "reference_dir": str(ref)}
    with pytest.raises(AbsaError, match="other raw files than the pinned"):
        session.setup("01_data", {"__annotations__": dict.fromkeys(common, str), **common})
