"""Datasets from ragas / HF JSONL, ragas EvaluationDataset, TREC topics + qrels and DataFrames,
with the native format's row errors (file, line, field)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from rag_lab.eval.datasets import (
    CorpusDoc,
    Dataset,
    DatasetError,
    from_ragas_dataset,
    read_ragas_jsonl,
    read_trec,
    write_dataset,
)
from rag_lab.eval.records import QueryRecord

CORPUS = [
    CorpusDoc("d1", "The Brightwater lighthouse was built in 1874.", "Lighthouse"),
    CorpusDoc("d2", "Sourdough rises thanks to wild yeast.", "Bread"),
    CorpusDoc("d3", "Mount Ember last erupted in 1921. Its crater lake is acidic.", "Volcano"),
]


def _records():
    return [
        QueryRecord(qid="a", question="When was the lighthouse built?", gold_ids=["d1"], answers=["1874"]),
        QueryRecord(qid="b", question="What makes sourdough rise?", gold_ids=["d2", "d3"], answers=["wild yeast"]),
    ]


def test_ragas_export_round_trips(tmp_path):
    from rag_lab.eval.formats import export_records

    texts = {d.id: d.text for d in CORPUS}
    path = export_records(_records(), tmp_path, "run", ["ragas"], reference_texts=texts)["ragas"]
    ds = read_ragas_jsonl(path, corpus=CORPUS)
    assert [(q.question, q.answers, q.gold_ids) for q in ds.queries] == [
        (r.question, r.answers, r.gold_ids) for r in _records()
    ]
    # without a corpus, the reference contexts become the corpus
    own = read_ragas_jsonl(path)
    assert sorted(d.text for d in own.corpus) == sorted(texts.values())
    assert [len(q.gold_ids) for q in own.queries] == [1, 2]
    # the same through a ragas EvaluationDataset object
    from ragas import EvaluationDataset

    obj = from_ragas_dataset(EvaluationDataset.from_jsonl(str(path)), corpus=CORPUS)
    assert [q.gold_ids for q in obj.queries] == [["d1"], ["d2", "d3"]]
    # and the result writes as a native dataset that loads
    assert len(write_dataset(ds.corpus, ds.queries, tmp_path / "native").queries) == 2


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_ragas_row_errors_name_file_line_field(tmp_path):
    good = {"user_input": "q?", "reference": "r", "reference_contexts": [CORPUS[0].text]}
    cases = [
        ({"user_input": "", "reference_contexts": ["x"]}, "user_input"),
        ({"user_input": "q", "reference": 3, "reference_contexts": ["x"]}, "reference"),
        ({"user_input": "q"}, "reference_contexts"),
        ({"user_input": "q", "reference_contexts": ["not in any document"]}, "reference_contexts[0]"),
        ({**good, "id": " x"}, "id"),
    ]
    for bad, field in cases:
        p = _jsonl(tmp_path / "s.jsonl", [good, bad])
        with pytest.raises(DatasetError, match=rf"s.jsonl:2: field {field!r}".replace("[", r"\[")):
            read_ragas_jsonl(p, corpus=CORPUS)
    p = tmp_path / "broken.jsonl"
    p.write_text(json.dumps(good) + "\n{oops\n")
    with pytest.raises(DatasetError, match=r"broken.jsonl:2: invalid JSON"):
        read_ragas_jsonl(p, corpus=CORPUS)


def test_trec_topics_and_graded_qrels(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in CORPUS))
    (tmp_path / "topics.tsv").write_text("1\tlighthouse year\n2\tbread yeast\n3\tno qrels here\n")
    (tmp_path / "qrels.txt").write_text("1 0 d1 2\n1 0 d3 0\n2 0 d2 1\n")
    ds = read_trec(tmp_path / "topics.tsv", tmp_path / "qrels.txt", tmp_path / "corpus.jsonl")
    assert [(q.id, q.gold_ids, q.relevance) for q in ds.queries] == [
        ("1", ["d1"], {"d1": 2, "d3": 0}),
        ("2", ["d2"], {}),
    ]
    assert "topic '3'" in ds.skipped_lines[0]
    sgml = "<top>\n<num> Number: 7\n<title> lighthouse\n<desc> Description: when built\n</top>\n"
    (tmp_path / "topics.sgml").write_text(sgml)
    (tmp_path / "q7.txt").write_text("7 0 d1 1\n")
    assert read_trec(tmp_path / "topics.sgml", tmp_path / "q7.txt", CORPUS).queries[0].question == "lighthouse"
    for qrels, field in (("1 0 d9 1\n", "docid"), ("9 0 d1 1\n", "qid"), ("1 0 d1 x\n", "grade"), ("1 d1 1\n", "line")):
        (tmp_path / "bad.txt").write_text("2 0 d2 1\n" + qrels)
        with pytest.raises(DatasetError, match=rf"bad.txt:2: field {field!r}"):
            read_trec(tmp_path / "topics.tsv", tmp_path / "bad.txt", CORPUS)
    (tmp_path / "t.tsv").write_text("1\tok\nno tab here\n")
    with pytest.raises(DatasetError, match=r"t.tsv:2: field 'text'"):
        read_trec(tmp_path / "t.tsv", tmp_path / "qrels.txt", CORPUS)


def test_from_frame():
    corpus = pd.DataFrame([{"id": d.id, "title": d.title, "text": d.text} for d in CORPUS])
    queries = pd.DataFrame(
        [
            {"id": "a", "question": "lighthouse?", "answers": ["1874"], "gold_ids": ["d1"], "relevance": None},
            {"id": "b", "question": "bread?", "answers": [], "gold_ids": ["d2"], "relevance": {"d2": 2}},
        ]
    )
    ds = Dataset.from_frame(queries, corpus, name="mine")
    assert [q.grades() for q in ds.queries] == [{"d1": 1}, {"d2": 2}]
    assert Dataset.from_frame(queries, CORPUS).corpus == CORPUS
    bad = queries.copy()
    bad.loc[1, "gold_ids"] = ["d9"]
    with pytest.raises(DatasetError, match=r"<DataFrame queries>:2: field 'gold_ids\[0\]' = \"d9\": unknown corpus id"):
        Dataset.from_frame(bad, corpus)
    with pytest.raises(DatasetError, match=r"<DataFrame queries>:1: field 'question' is missing"):
        Dataset.from_frame(queries.drop(columns=["question"]), corpus)
    with pytest.raises(DatasetError, match=r"<DataFrame corpus>:3: field 'id'"):
        Dataset.from_frame(queries, pd.concat([corpus.iloc[:2], corpus.iloc[:1]]))


def test_convert_cli(tmp_path, capsys):
    from rag_lab.commands.evaluate import main
    from rag_lab.eval.datasets import load_dataset

    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in CORPUS))
    (tmp_path / "topics.tsv").write_text("1\tlighthouse year\n2\tbread\n")
    (tmp_path / "qrels.txt").write_text("1 0 d1 2\n2 0 d2 1\n")
    rc = main(["convert", "trec", str(tmp_path / "topics.tsv"), "--qrels", str(tmp_path / "qrels.txt"),
               "--corpus", str(tmp_path / "corpus.jsonl"), "--out", str(tmp_path / "out")])  # fmt: skip
    assert rc == 0
    assert load_dataset(tmp_path / "out").queries[0].relevance == {"d1": 2}
    rows = [{"user_input": "q?", "reference": "r", "reference_contexts": [CORPUS[1].text]}]
    _jsonl(tmp_path / "r.jsonl", rows)
    assert main(["convert", "ragas", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "out2")]) == 0
    assert len(load_dataset(tmp_path / "out2").corpus) == 1
    assert "wrote" in capsys.readouterr().out
