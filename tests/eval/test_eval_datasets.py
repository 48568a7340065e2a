"""Tests for rag_lab.eval.datasets (validation, subsets) and the converted datasets/ folders."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.datasets import (
    CorpusDoc,
    Dataset,
    DatasetError,
    QueryItem,
    datasets_root,
    list_datasets,
    load_dataset,
)

REPO = Path(__file__).resolve().parents[2]
RAW = REPO.parent / "shared" / "datasets-raw"


def _line(obj: Any) -> str:
    return obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)


def make(tmp_path: Path, corpus: list[Any], queries: list[Any], name: str = "toy") -> Path:
    """Write a dataset folder; str items are written verbatim, others as JSON."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(_line(r) + "\n" for r in corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(_line(r) + "\n" for r in queries), encoding="utf-8")
    return folder


DOCS = [
    {"id": "a", "title": "A", "text": "alpha", "metadata": {"k": 1}},
    {"id": "b", "text": "beta"},
    {"id": "c", "title": "", "text": "gamma"},
]
QS = [
    {"id": "q1", "question": "what is alpha?", "answers": ["alpha"], "gold_ids": ["a"]},
    {"id": "q2", "question": "beta and gamma?", "answers": [], "gold_ids": ["b", "c"], "metadata": {"s": "x"}},
]


def err(tmp_path: Path, corpus: list[Any], queries: list[Any]) -> str:
    with pytest.raises(DatasetError) as info:
        load_dataset(make(tmp_path, corpus, queries))
    return str(info.value)


# --------------------------------------------------------------------------- valid input


def test_load_valid_with_defaults(tmp_path: Path) -> None:
    ds = load_dataset(make(tmp_path, DOCS, QS))
    assert ds.name == "toy"
    assert ds.corpus[1] == CorpusDoc(id="b", text="beta", title="", metadata={})
    assert ds.corpus[0].metadata == {"k": 1}
    assert ds.queries[1] == QueryItem(
        id="q2", question="beta and gamma?", answers=[], gold_ids=["b", "c"], metadata={"s": "x"}
    )
    assert ds.qrels() == {"q1": {"a"}, "q2": {"b", "c"}}
    assert ds.doc("c").text == "gamma"
    assert ds.skipped_lines == []
    with pytest.raises(KeyError, match='"zz"'):
        ds.doc("zz")


def test_blank_lines_are_skipped_and_reported_and_line_numbers_stay_true(tmp_path: Path) -> None:
    folder = make(tmp_path, [DOCS[0], "", "   ", DOCS[1], DOCS[2]], [QS[0], "\t", QS[1]])
    ds = load_dataset(folder)
    assert [d.id for d in ds.corpus] == ["a", "b", "c"]
    assert ds.skipped_lines == [
        f"{folder / 'corpus.jsonl'}:2: blank line skipped",
        f"{folder / 'corpus.jsonl'}:3: blank line skipped",
        f"{folder / 'queries.jsonl'}:2: blank line skipped",
    ]
    other = tmp_path / "other"
    other.mkdir()
    msg = err(other, ["", DOCS[0], "{oops"], QS)
    assert re.search(r"corpus\.jsonl:3: invalid JSON \(.* at column 2\): \"\{oops\"", msg), msg


def test_unicode_line_separator_inside_text_is_data(tmp_path: Path) -> None:
    doc = {"id": "a", "text": "one\u2028two\u0085three"}
    folder = make(tmp_path, [doc, DOCS[1], DOCS[2]], [QS[0]])
    ds = load_dataset(folder)
    assert ds.corpus[0].text == "one\u2028two\u0085three"
    assert len(ds.corpus) == 3


def test_utf8_bom_on_first_line_is_accepted(tmp_path: Path) -> None:
    folder = make(tmp_path, DOCS, QS)
    path = folder / "corpus.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_dataset(folder).corpus[0].id == "a"


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("corpus", "queries", "pattern"),
    [
        ([DOCS[0], [1, 2]], QS[:1], r"corpus\.jsonl:2: row must be a JSON object, got list: \[1, 2\]"),
        ([DOCS[0], {"id": "b"}], QS[:1], r"corpus\.jsonl:2: field 'text' is missing"),
        ([DOCS[0], {"id": 7, "text": "t"}], QS[:1], r"corpus\.jsonl:2: field 'id' = 7: must be a string, got int"),
        ([DOCS[0], {"id": "", "text": "t"}], QS[:1], r"corpus\.jsonl:2: field 'id' = \"\": must be a non-empty string"),
        ([DOCS[0], {"id": " b", "text": "t"}], QS[:1], r"corpus\.jsonl:2: field 'id' = \" b\": must not start or end"),
        ([DOCS[0], {"id": "b", "text": "  "}], QS[:1], r"corpus\.jsonl:2: field 'text' = \"  \": must not be empty"),
        (
            [DOCS[0], {"id": "b", "text": "t", "title": None}],
            QS[:1],
            r"corpus\.jsonl:2: field 'title' = null: must be a string",
        ),
        (
            [DOCS[0], {"id": "b", "text": "t", "metadata": []}],
            QS[:1],
            r"corpus\.jsonl:2: field 'metadata' = \[\]: must be a JSON object",
        ),
        (
            [DOCS[0], {"id": "b", "text": "t", "body": "x"}],
            QS[:1],
            r"corpus\.jsonl:2: field 'body' = \"x\": unknown field",
        ),
        (
            [DOCS[0], DOCS[1], dict(DOCS[0], text="again")],
            QS[:1],
            r"corpus\.jsonl:3: field 'id' = \"a\": duplicate id \(first seen on line 1\)",
        ),
        (DOCS, [QS[0], dict(QS[0])], r"queries\.jsonl:2: field 'id' = \"q1\": duplicate id \(first seen on line 1\)"),
        (
            DOCS,
            [dict(QS[0], answers="alpha")],
            r"queries\.jsonl:1: field 'answers' = \"alpha\": must be a list of strings, got str",
        ),
        (
            DOCS,
            [dict(QS[0], answers=["x", 3])],
            r"queries\.jsonl:1: field 'answers\[1\]' = 3: must be a string, got int",
        ),
        (
            DOCS,
            [dict(QS[0], gold_ids=["a", None])],
            r"queries\.jsonl:1: field 'gold_ids\[1\]' = null: must be a string",
        ),
        (
            DOCS,
            [dict(QS[0], gold_ids=["a", "a"])],
            r"queries\.jsonl:1: field 'gold_ids\[1\]' = \"a\": duplicate id in the list",
        ),
        (
            DOCS,
            [QS[0], dict(QS[1], gold_ids=["b", "zz"])],
            r"queries\.jsonl:2: field 'gold_ids\[1\]' = \"zz\": unknown corpus id",
        ),
        (DOCS, [dict(QS[0], question="")], r"queries\.jsonl:1: field 'question' = \"\": must not be empty"),
        (DOCS, [{"id": "q", "question": "?", "answers": []}], r"queries\.jsonl:1: field 'gold_ids' is missing"),
        (DOCS, [], r"queries\.jsonl: the file holds no queries"),
        ([], QS, r"corpus\.jsonl: the corpus holds no documents"),
    ],
)
def test_invalid_rows_name_file_line_field_value(
    tmp_path: Path, corpus: list[Any], queries: list[Any], pattern: str
) -> None:
    msg = err(tmp_path, corpus, queries)
    assert re.search(pattern, msg), msg
    assert str(tmp_path / "toy") in msg


def test_long_values_are_cut_to_80_chars(tmp_path: Path) -> None:
    long_id = "x" * 500
    msg = err(tmp_path, DOCS, [dict(QS[0], gold_ids=[long_id])])
    value = re.search(r"= (.*): unknown corpus id", msg).group(1)  # type: ignore[union-attr]
    assert len(value) == 80 and value.endswith("...") and value.startswith('"xxx')


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    folder = make(tmp_path, DOCS, QS)
    (folder / "corpus.jsonl").write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "\xff"}\n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:2: not valid UTF-8"):
        load_dataset(folder)


def test_missing_file_and_unknown_name(tmp_path: Path) -> None:
    folder = make(tmp_path, DOCS, QS)
    (folder / "queries.jsonl").unlink()
    with pytest.raises(DatasetError, match=r"queries\.jsonl: file not found"):
        load_dataset(folder)
    with pytest.raises(DatasetError, match=r"'no_such_set' not found.*available: .*cmrc2018"):
        load_dataset("no_such_set")


# --------------------------------------------------------------------------- head / subset


def toy(n_docs: int = 30, n_queries: int = 10) -> Dataset:
    corpus = [CorpusDoc(id=f"d{i}", text=f"text {i}") for i in range(n_docs)]
    queries = [
        QueryItem(id=f"q{i}", question="?", answers=[], gold_ids=[f"d{(3 * i) % n_docs}", f"d{(3 * i + 1) % n_docs}"])
        for i in range(n_queries)
    ]
    return Dataset(name="toy", path=Path("."), corpus=corpus, queries=queries)


def test_head_keeps_full_corpus() -> None:
    ds = toy()
    h = ds.head(3)
    assert [q.id for q in h.queries] == ["q0", "q1", "q2"]
    assert h.corpus == ds.corpus
    assert len(ds.queries) == 10  # original untouched
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        ds.head(-1)


def test_subset_concrete() -> None:
    ds = toy()
    s = ds.subset(2, max_docs=6, seed=0)
    ids = [d.id for d in s.corpus]
    assert [q.id for q in s.queries] == ["q0", "q1"]
    assert {"d0", "d1", "d3", "d4"} <= set(ids) and len(ids) == 6
    assert ids == sorted(ids, key=lambda x: int(x[1:]))  # corpus order kept
    assert ds.subset(2, max_docs=6, seed=0).corpus == s.corpus
    assert ds.subset(2).corpus == ds.corpus
    with pytest.raises(ValueError, match="4 gold documents, more than max_docs=3"):
        ds.subset(2, max_docs=3)


@settings(max_examples=60)
@given(st.integers(0, 10), st.integers(0, 40), st.integers(0, 5))
def test_subset_properties(n_queries: int, max_docs: int, seed: int) -> None:
    ds = toy()
    gold = {g for q in ds.queries[:n_queries] for g in q.gold_ids}
    if len(gold) > max_docs:
        with pytest.raises(ValueError):
            ds.subset(n_queries, max_docs=max_docs, seed=seed)
        return
    s = ds.subset(n_queries, max_docs=max_docs, seed=seed)
    ids = [d.id for d in s.corpus]
    assert len(ids) == min(max_docs, len(ds.corpus))
    assert gold <= set(ids)
    assert [d for d in ds.corpus if d.id in set(ids)] == s.corpus
    assert s.queries == ds.queries[:n_queries]
    assert ds.subset(n_queries, max_docs=max_docs, seed=seed) == s


# --------------------------------------------------------------------------- the converted datasets


def test_datasets_root_and_listing() -> None:
    assert datasets_root() == REPO / "datasets"
    assert list_datasets() == [
        "cmrc2018",
        "cmrc2018_pool",
        "hotpotqa_distractor40",
        "hotpotqa_hipporag100",
        "pubmedqa_long",
        "pubmedqa_pqal",
    ]


def test_cmrc2018_loads() -> None:
    ds = load_dataset("cmrc2018")
    assert (len(ds.corpus), len(ds.queries)) == (256, 1000)
    q = ds.queries[0]
    assert (q.id, q.question, q.answers, q.gold_ids) == (
        "TRIAL_800_QUERY_0",
        "生命数耗完即算为什么？",
        ["踢爆"],
        ["TRIAL_800"],
    )
    assert ds.doc("TRIAL_800").title == "泡泡战士"
    assert all(len(q.gold_ids) == 1 and q.answers for q in ds.queries)


def test_hotpotqa_gold_ids_are_the_supporting_titles() -> None:
    ds = load_dataset("hotpotqa_hipporag100")
    assert (len(ds.corpus), len(ds.queries)) == (994, 100)
    title = {d.id: d.title for d in ds.corpus}
    for q in ds.queries:
        assert len(q.gold_ids) == 2
        assert {title[g] for g in q.gold_ids} == {t for t, _ in q.metadata["supporting_facts"]}
        assert set(q.gold_ids) <= set(q.metadata["context_ids"])
        assert "unmapped_gold_titles" not in q.metadata
    first = ds.queries[0]
    assert first.answers == ["a spirit"]
    doc = ds.doc(first.gold_ids[1])  # "Lilu (mythology)", sentence 0 is gold evidence
    assert doc.title == "Lilu (mythology)" and doc.metadata["sentence_starts"][0] == 0


def test_pubmedqa_test_split_first() -> None:
    ds = load_dataset("pubmedqa_pqal")
    assert (len(ds.corpus), len(ds.queries)) == (1000, 1000)
    assert [q.metadata["split"] for q in ds.queries] == ["test"] * 500 + ["trainval"] * 500
    for q in ds.queries:
        assert q.gold_ids == [q.id]
        assert q.answers[0] in {"yes", "no", "maybe"} and q.answers[0] == q.metadata["final_decision"]
    d = ds.doc("21645374")
    starts = d.metadata["section_starts"]
    assert len(starts) == len(d.metadata["section_labels"]) and d.text[starts[1] - 2 : starts[1]] == "\n\n"


def test_hotpotqa_distractor40_holds_each_questions_own_distractors() -> None:
    ds = load_dataset("hotpotqa_distractor40")
    full = load_dataset("hotpotqa_hipporag100")
    assert (len(ds.corpus), len(ds.queries)) == (400, 40)
    assert [q.id for q in ds.queries] == [q.id for q in full.queries[:40]]
    ids = {d.id for d in ds.corpus}
    for q in ds.queries:
        assert set(q.metadata["context_ids"]) <= ids and set(q.gold_ids) <= ids
    gold = {g for q in ds.queries for g in q.gold_ids}
    assert len(gold) == 80  # 20 % of the corpus: 320 distractors, 8 of them chosen for each question
    assert ds.doc(ds.corpus[0].id) == full.doc(ds.corpus[0].id)


def test_cmrc2018_pool_dev_questions_over_dev_and_trial_paragraphs() -> None:
    ds = load_dataset("cmrc2018_pool")
    assert (len(ds.corpus), len(ds.queries)) == (1104, 848)
    splits = [d.metadata["split"] for d in ds.corpus]
    assert splits == ["dev"] * 848 + ["trial"] * 256
    assert len({q.gold_ids[0] for q in ds.queries}) == 848  # one question per dev paragraph
    q = ds.queries[0]
    assert (q.id, q.question, q.answers, q.gold_ids) == (
        "DEV_0_QUERY_0",
        "《战国无双3》是由哪两个公司合作开发的？",
        ["光荣和ω-force"],
        ["DEV_0"],
    )


def test_pubmedqa_long_uses_the_long_answer_as_reference() -> None:
    ds = load_dataset("pubmedqa_long")
    labelled = load_dataset("pubmedqa_pqal")
    assert (len(ds.corpus), len(ds.queries)) == (1000, 500)
    by_id = {q.id: q for q in labelled.queries}
    for q in ds.queries:
        ref = by_id[q.id]
        assert q.answers == [ref.answers[1]] and q.metadata["final_decision"] == ref.answers[0]
        assert q.metadata["split"] == "test" and len(q.answers[0]) > 40
        assert q.answers[0] not in ds.doc(q.id).text  # the conclusion is not part of the document


def test_each_dataset_folder_is_small_and_licensed() -> None:
    for name in list_datasets():
        folder = datasets_root() / name
        assert sum(p.stat().st_size for p in folder.iterdir()) < 3 * 1024 * 1024
        assert (folder / "LICENSE").stat().st_size > 1000
        assert "## Files" in (folder / "PROVENANCE.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the converter


def converter() -> ModuleType:
    spec = importlib.util.spec_from_file_location("convert_datasets", REPO / "scripts" / "convert_datasets.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["convert_datasets"] = mod
    spec.loader.exec_module(mod)
    return mod


needs_raw = pytest.mark.skipif(not RAW.is_dir(), reason=f"raw datasets not present at {RAW}")


@needs_raw
def test_converter_is_deterministic_and_outputs_are_up_to_date(tmp_path: Path) -> None:
    assert converter().main(["--raw", str(RAW), "--out", str(tmp_path)]) == 0
    for name in list_datasets():
        for f in ("corpus.jsonl", "queries.jsonl", "LICENSE", "PROVENANCE.md"):
            assert (tmp_path / name / f).read_bytes() == (datasets_root() / name / f).read_bytes(), (name, f)


@needs_raw
def test_converter_rejects_altered_raw_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW / "cmrc2018", raw / "cmrc2018")
    target = raw / "cmrc2018" / "cmrc2018_trial.json"
    target.chmod(0o644)
    target.write_bytes(target.read_bytes() + b" ")
    assert converter().main(["--raw", str(raw), "--out", str(tmp_path / "out"), "--only", "cmrc2018"]) == 1
    assert "differs from the recorded" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
