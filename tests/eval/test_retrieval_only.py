"""``eval --retrieval-only`` scores the search stage's own list (what first-stage figures in the
literature measure), and ingest prepares the re-scorer's and answerer's texts only when the lab
will read them (``ingest: {prepare: auto|all|none}``, ``rag-lab ingest --prepare``)."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

import pytest

from rag_lab.lab.lab import Lab, LabConfigError, prepare_texts_for


def test_retrieval_only_scores_the_search_stages_list(eval_lab: Any, small_ds: Any, small_spec: Any) -> None:
    from rag_lab.eval.funnel import funnel_summary
    from rag_lab.eval.runner import evaluate_lab

    kb = small_spec.kb_name
    full = asyncio.run(evaluate_lab(eval_lab, small_ds, kb, ks=(5, 10), progress=False))
    only = asyncio.run(evaluate_lab(eval_lab, small_ds, kb, ks=(5, 10), progress=False, retrieval_only=True))
    stages = funnel_summary(full.records)
    got = only.report.summary()
    # the retrieval-only list is the full run's search-stage list: the same recall and nDCG
    for m in ("recall@5", "recall@10", "ndcg@10", "map"):
        assert got[m] == pytest.approx(stages[f"search.{m}"]), m
    assert all(r.answer == "" and not r.error for r in only.records)
    run = asyncio.run(eval_lab.aask(small_ds.queries[0].question, kb=kb, retrieval_only=True, snapshots=False))
    assert run.stages[-1] == "chunk_search_parallel" and "chunk_rerank" not in run.stages
    assert run.references and run.ledger.summary()["calls"].get("rerank", 0) == 0
    only_funnel = funnel_summary(only.records)
    # the stages that did not run pass the search list on: every later stage equals it
    assert only_funnel["rerank.recall@10"] == only_funnel["search.recall@10"] == pytest.approx(got["recall@10"])
    assert only_funnel["final.ndcg@10"] == pytest.approx(got["ndcg@10"])


def test_ingest_prepares_answer_texts_only_when_they_will_be_read() -> None:
    docs = [
        {"id": f"d{i}", "text": f"Sentence one of {i}. Sentence two of {i}, longer than the first."} for i in range(3)
    ]
    for prepare, expect_prepared in ((True, True), (False, False)):
        lab = Lab.from_config({"ingest": {"prepare": "all" if prepare else "none"}}, workspace=tempfile.mkdtemp())
        report = lab.ingest_documents(docs, kb="k", progress=False)
        assert (report.texts_prepared > 0) is expect_prepared, prepare
        assert report.vectors_added == 3  # the chunks are embedded either way
        lab.workspace.close()
    default = {"embedder": {"type": "onnx-minilm"}}
    assert prepare_texts_for(None, default, "x") is True  # the offline re-scorer and answerer embed
    remote = {"reranker": {"type": "http", "base_url": "http://h", "model": "m"}, "chat": {"type": "openai"}}
    assert prepare_texts_for(None, remote, "x") is False
    assert prepare_texts_for(None, {**remote, "chat": {"type": "extractive"}}, "x") is True
    assert prepare_texts_for({"prepare": "all"}, remote, "x") is True
    assert prepare_texts_for({"prepare": "none"}, default, "x") is False
    assert prepare_texts_for(None, {"reranker": None, "chat": {"type": "openai"}}, "x") is False
    with pytest.raises(LabConfigError, match=r"lab.yaml: ingest.prepare = 'maybe': use auto, all or none"):
        prepare_texts_for({"prepare": "maybe"}, default, "lab.yaml")
    with pytest.raises(LabConfigError, match=r"ingest: expected \{prepare: auto\|all\|none\}"):
        prepare_texts_for({"prepare": "all", "fast": True}, default, "lab.yaml")


def test_retrieval_only_refuses_answer_metrics(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    argv = ["--workspace", str(tmp_path / "ws"), "eval", "--dataset", "hotpotqa_hipporag100@2-4:8", "--quiet"]
    assert main([*argv, "--retrieval-only", "--ragas", "--out", str(tmp_path / "o")]) == 2
    assert "ragas metrics need answers" in capsys.readouterr().err
    assert main([*argv, "--retrieval-only", "--out", str(tmp_path / "o"), "--name", "r"]) == 0
    import json

    rep = json.loads((tmp_path / "o" / "r.json").read_text(encoding="utf-8"))
    assert rep["meta"]["spec"]["retrieval_only"] is True
