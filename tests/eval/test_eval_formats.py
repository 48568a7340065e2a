"""Data in and out: TREC run/qrels round-trip and pytrec_eval reproduces the report's metrics;
HF-style JSONL and ragas EvaluationDataset round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.formats import (
    FormatError,
    read_samples_jsonl,
    read_trec_qrels,
    read_trec_run,
    to_ragas_dataset,
    trec_ranking,
    write_samples_jsonl,
    write_trec_qrels,
    write_trec_run,
)
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.records import QueryRecord

DOC = st.sampled_from([f"d{i}" for i in range(12)])


def _records(spec):
    return [
        QueryRecord(
            qid=f"q{i}",
            question=f"question {i}?",
            gold_ids=list(dict.fromkeys(g)),
            answers=["a"],
            retrieved_doc_ids=list(r),
            context_doc_ids=list(r),
            contexts=[f"text of {d}" for d in r],
            context_ids=[f"kb:{d}#c0" for d in r],
            answer=f"answer {i}",
        )
        for i, (g, r) in enumerate(spec)
    ]


SPEC = st.lists(
    st.tuples(st.lists(DOC, min_size=1, max_size=4), st.lists(DOC, min_size=1, max_size=10)), min_size=1, max_size=8
)


@settings(max_examples=60)
@given(SPEC)
def test_trec_round_trip_and_pytrec_eval_agree_with_the_report(tmp_path_factory, spec):
    import pytrec_eval

    records = _records(spec)
    d = tmp_path_factory.mktemp("trec")
    run = read_trec_run(write_trec_run(records, d / "run.txt", "test"))
    qrels = read_trec_qrels(write_trec_qrels(records, d / "qrels.txt"))
    assert {q: trec_ranking(docs) for q, docs in run.items()} == {
        r.qid: list(dict.fromkeys(r.retrieved_doc_ids)) for r in records
    }
    assert qrels == {r.qid: {g: 1 for g in r.gold_ids} for r in records}
    report = evaluate_retrieval(
        {r.qid: r.retrieved_doc_ids for r in records}, {r.qid: r.gold_ids for r in records}, ks=[1, 5, 10]
    )
    measures = {"recall_5", "recall_10", "ndcg_cut_10", "recip_rank", "map", "P_5"}
    te = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    ours = {r["qid"]: r for r in report.rows}
    for qid, m in te.items():
        assert m["recall_5"] == pytest.approx(ours[qid]["recall@5"])
        assert m["recall_10"] == pytest.approx(ours[qid]["recall@10"])
        assert m["ndcg_cut_10"] == pytest.approx(ours[qid]["ndcg@10"])
        assert m["recip_rank"] == pytest.approx(ours[qid]["mrr"])
        assert m["map"] == pytest.approx(ours[qid]["map"])
        assert m["P_5"] == pytest.approx(ours[qid]["precision@5"])


def test_trec_files_are_checked(tmp_path):
    bad = tmp_path / "run.txt"
    bad.write_text("q1 Q0 d1 1 high run\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"run.txt:1: field 'score' = 'high' is not a number"):
        read_trec_run(bad)
    with pytest.raises(FormatError, match="has spaces"):
        write_trec_run(_records([(["d1"], ["d 2"])]), tmp_path / "r.txt")


def test_jsonl_round_trip(tmp_path):
    records = _records([(["d1", "d2"], ["d3", "d1", "d1"]), (["d4"], ["d4"])])
    back = read_samples_jsonl(write_samples_jsonl(records, tmp_path / "s.jsonl"))
    for a, b in zip(records, back):
        assert (a.qid, a.question, a.answer, a.answers, a.gold_ids, a.contexts, a.context_ids, a.context_doc_ids) == (
            b.qid,
            b.question,
            b.answer,
            b.answers,
            b.gold_ids,
            b.contexts,
            b.context_ids,
            b.context_doc_ids,
        )
        assert b.retrieved_doc_ids == list(dict.fromkeys(a.retrieved_doc_ids))
    (tmp_path / "bad.jsonl").write_text('{"id": "q1", "question": "x", "gold_ids": "d1"}\n', encoding="utf-8")
    with pytest.raises(FormatError, match=r"bad.jsonl:1: field 'gold_ids' = 'd1' must be a list of strings"):
        read_samples_jsonl(tmp_path / "bad.jsonl")


def test_ragas_dataset_round_trip():
    records = _records([(["d1"], ["d1", "d2"]), (["d3"], ["d2"])])
    ds = to_ragas_dataset(records, {"d1": "gold text one"})
    assert len(ds.samples) == 2
    s0 = ds.samples[0]
    assert s0.user_input == "question 0?" and s0.retrieved_contexts == ["text of d1", "text of d2"]
    assert s0.reference == "a" and s0.reference_contexts == ["gold text one"] and s0.response == "answer 0"
    assert [(s.user_input, s.retrieved_contexts, s.response, [s.reference]) for s in ds.samples] == [
        (r.question, r.contexts, r.answer, r.answers) for r in records
    ]


def test_export_report_writes_one_set_per_suite(tmp_path):
    """Two suites whose question ids collide: each gets its own files, keyed by suite."""
    from rag_lab.eval.formats import export_report
    from rag_lab.eval.report import EvalReport, SuiteResult

    def suite(name, spec):
        records = _records(spec)
        retrieval = evaluate_retrieval(
            {r.qid: r.retrieved_doc_ids for r in records}, {r.qid: r.gold_ids for r in records}, ks=[5]
        )
        return SuiteResult(name, name, f"kb-{name}", {"dataset": name}, {}, retrieval, records)

    report = EvalReport([suite("a", [(["d1"], ["d1", "d2"])]), suite("b", [(["d3"], ["d4", "d3"])])])
    paths = export_report(report, tmp_path, "nightly", ["trec", "jsonl"])
    assert {k: p.name for k, p in paths.items()} == {
        "a:trec_run": "nightly.a.run.trec",
        "a:trec_qrels": "nightly.a.qrels.trec",
        "a:jsonl": "nightly.a.samples.jsonl",
        "b:trec_run": "nightly.b.run.trec",
        "b:trec_qrels": "nightly.b.qrels.trec",
        "b:jsonl": "nightly.b.samples.jsonl",
    }
    assert trec_ranking(read_trec_run(paths["b:trec_run"])["q0"]) == ["d4", "d3"]
    assert read_trec_qrels(paths["a:trec_qrels"]) == {"q0": {"d1": 1}}
    assert read_trec_run(paths["a:trec_run"])["q0"] == {"d1": 2.0, "d2": 1.0}
    with pytest.raises(ValueError, match="unknown export format.*csv"):
        export_report(report, tmp_path, "x", ["csv"])
