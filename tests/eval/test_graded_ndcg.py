"""Graded relevance: ``relevance: {doc_id: grade}`` in queries.jsonl flows into nDCG as trec_eval
computes ``ndcg_cut_k`` with graded qrels (checked against pytrec_eval); binary stays as it was."""

from __future__ import annotations

import json
import math
import random

import pytest

from rag_lab.eval.datasets import DatasetError, load_dataset
from rag_lab.eval.metrics import evaluate_retrieval, ndcg_at_k

pytrec_eval = pytest.importorskip("pytrec_eval")


def test_graded_ndcg_equals_pytrec_eval_on_random_qrels():
    rng = random.Random(25)
    docs = [f"d{i}" for i in range(15)]
    for _ in range(200):
        grades = {d: rng.randint(0, 3) for d in rng.sample(docs, rng.randint(1, 8))}
        if not any(grades.values()):
            grades[next(iter(grades))] = 1
        ranking = rng.sample(docs, rng.randint(1, 12))
        run = {"q": {d: float(len(ranking) - i) for i, d in enumerate(ranking)}}
        ks = (1, 3, 5, 10)
        ev = pytrec_eval.RelevanceEvaluator({"q": grades}, {f"ndcg_cut.{','.join(map(str, ks))}"})
        ref = ev.evaluate(run)["q"]
        gold = {d for d, g in grades.items() if g > 0}
        report = evaluate_retrieval({"q": ranking}, {"q": gold}, ks=ks, grades={"q": grades})
        for k in ks:
            assert report.rows[0][f"ndcg@{k}"] == pytest.approx(ref[f"ndcg_cut_{k}"], abs=1e-12)


def test_binary_unchanged_and_all_ones_equals_binary():
    ranking, gold = ["a", "x", "b", "c"], {"a", "b", "z"}
    for k in (1, 2, 3, 10):
        binary = ndcg_at_k(ranking, gold, k)
        assert ndcg_at_k(ranking, gold, k, grades=dict.fromkeys(gold, 1)) == pytest.approx(binary, abs=1e-15)
    plain = evaluate_retrieval({"q": ranking}, {"q": gold}).rows
    assert evaluate_retrieval({"q": ranking}, {"q": gold}, grades=None).rows == plain
    # a query the grades do not name stays binary
    assert evaluate_retrieval({"q": ranking}, {"q": gold}, grades={"other": {"a": 3}}).rows == plain


def _write(tmp_path, query):
    (tmp_path / "corpus.jsonl").write_text('{"id": "a", "text": "A"}\n{"id": "b", "text": "B"}\n')
    (tmp_path / "queries.jsonl").write_text(json.dumps(query) + "\n")


def test_relevance_field_loads_and_validates(tmp_path):
    base = {"id": "q1", "question": "?", "answers": [], "gold_ids": ["a", "b"]}
    _write(tmp_path, {**base, "relevance": {"a": 3}})
    ds = load_dataset(tmp_path)
    assert ds.queries[0].grades() == {"a": 3, "b": 1}
    assert ds.graded_qrels() == {"q1": {"a": 3, "b": 1}}
    _write(tmp_path, base)
    assert load_dataset(tmp_path).graded_qrels() is None
    for bad, field in (({"zz": 1}, "relevance['zz']"), ({"a": -1}, "relevance['a']"), ({"a": 1.5}, "relevance['a']")):
        _write(tmp_path, {**base, "relevance": bad})
        with pytest.raises(DatasetError, match=rf"queries.jsonl:1: field {field!r}".replace("[", r"\[")):
            load_dataset(tmp_path)
    _write(tmp_path, {**base, "relevance": ["a"]})
    with pytest.raises(DatasetError, match="queries.jsonl:1: field 'relevance'"):
        load_dataset(tmp_path)


def test_the_fast_sweep_scores_graded_qrels_as_the_pipeline_evaluation_does() -> None:
    from rag_lab.eval.sweep.fast import RetrievalMemo

    qrels, grades = {"q1": {"d1", "d2"}, "q2": {"d3"}}, {"q1": {"d1": 1, "d2": 2}}
    runs = {"q1": ["d1", "d2"], "q2": ["d3"]}
    memo = RetrievalMemo(qrels, ks=(2,), grades=grades)
    expected = evaluate_retrieval(runs, qrels, ks=(2,), grades=grades).summary()
    assert memo.report(runs).summary() == expected
    # q1 graded: (1 + 2/log2 3) / (2 + 1/log2 3); q2 binary: 1
    assert expected["ndcg@2"] == pytest.approx(((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)) + 1) / 2)
    assert RetrievalMemo(qrels, ks=(2,)).report(runs).summary()["ndcg@2"] == 1.0


def test_graded_ndcg_counts_a_document_once_when_several_of_its_chunks_are_retrieved() -> None:
    """Several chunks of one document (the usual case in RAG) repeat its id: only its first rank
    counts, as trec_eval sees one document. By hand: [b, a, a] with grades a=2, b=1 is
    (1 + 2/log2 3) / (2 + 1/log2 3) = 0.859719."""
    grades = {"a": 2, "b": 1}
    assert ndcg_at_k(["a", "a", "b"], set(), 3, grades=grades) == pytest.approx(1.0)
    by_hand = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert (
        ndcg_at_k(["b", "a", "a"], set(), 3, grades=grades)
        == pytest.approx(by_hand)
        == pytest.approx(0.859719, abs=1e-6)
    )
    assert ndcg_at_k(["x", "a", "a", "a"], set(), 2, grades=grades) == pytest.approx(
        (2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )
