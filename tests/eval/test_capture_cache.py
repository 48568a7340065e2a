"""Captured stage inputs through the stage cache (``rag_lab.eval.cache.captures``): a capture read
back evaluates exactly like the one captured, a second capture of the same questions runs no
pipeline, and whatever the capture depends on (question, history, params, BM25 settings, KB
content) makes another key."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from rag_lab.eval.cache import enable_stage_cache
from rag_lab.eval.cache.captures import (
    CAPTURE_STAGE,
    CaptureRequest,
    acapture_cached,
    inputs_from_payload,
    inputs_payload,
)
from rag_lab.tuning import FastEvaluator, compare_references

pytestmark = pytest.mark.slow

GRID: list[dict[str, Any]] = [
    {},
    {"rerank_threshold": 0.9},
    {"rerank_threshold": 0.2, "mmr_lambda": 0.3, "rerank_top_k": 3},
    {"mmr_lambda": 0.0, "rerank_top_k": 5},
    {"composite_model_weight": 0.2, "composite_base_weight": 0.7, "composite_source_weight": 0.1},
    {"overlap_threshold": 0.3, "rerank_top_k": 8},
    {"expansion_min_len": 2000, "expansion_max_len": 3000, "rerank_top_k": 4},
]


def _requests(ds: Any, n: int = 5) -> list[CaptureRequest]:
    return [CaptureRequest(q.id, q.question) for q in ds.queries[:n]]


def _count_asks(lab: Any, monkeypatch: Any) -> list[str]:
    asked: list[str] = []
    real = lab.aask

    async def counting(question: str, *a: Any, **kw: Any) -> Any:
        asked.append(question)
        return await real(question, *a, **kw)

    monkeypatch.setattr(lab, "aask", counting)
    return asked


def _same_evaluations(a: list[Any], b: list[Any], params: Any) -> None:
    fa, fb = FastEvaluator(a, params), FastEvaluator(b, params)
    for config in GRID:
        ra, rb = fa.evaluate(config), fb.evaluate(config)
        assert list(ra) == list(rb)
        for qid in ra:
            assert compare_references(ra[qid], rb[qid]) == "", (config, qid)


def test_a_capture_read_back_evaluates_like_the_original(eval_lab: Any, small_ds: Any, small_spec: Any) -> None:
    params = eval_lab.params
    captured = asyncio.run(acapture_cached(eval_lab, _requests(small_ds), small_spec.kb_name, params))
    assert all(q.rerank is not None and q.rerank.jaccard.shape[0] > 0 for q in captured)
    # through JSON text, as the cache stores it
    back = [inputs_from_payload(json.loads(json.dumps(inputs_payload(q))), q.store) for q in captured]
    for a, b in zip(captured, back):
        assert a.qid == b.qid and a.query == b.query and compare_references(a.search_result, b.search_result) == ""
        assert a.rerank is not None and b.rerank is not None
        assert (a.rerank.jaccard == b.rerank.jaccard).all() and (a.rerank.model_score == b.rerank.model_score).all()
        assert b.rerank.model_index.dtype == a.rerank.model_index.dtype and b.rerank.is_faq.dtype == bool
    _same_evaluations(captured, back, params)


def test_a_second_capture_runs_no_pipeline_and_keys_follow_the_inputs(
    eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    kb = small_spec.kb_name
    params = eval_lab.params
    handle = enable_stage_cache(eval_lab, tmp_path / "cache")
    try:
        asked = _count_asks(eval_lab, monkeypatch)
        reqs = _requests(small_ds, 4)
        first = asyncio.run(acapture_cached(eval_lab, reqs, kb, params))
        assert len(asked) == 4 and handle.cache.entries(CAPTURE_STAGE) == 4
        again = asyncio.run(acapture_cached(eval_lab, reqs, kb, params))
        assert len(asked) == 4  # every question read back: no pipeline run
        assert handle.cache.stats()[CAPTURE_STAGE].hits == 4
        _same_evaluations(first, again, params)

        # another retrieval param, a history before the question: new captures
        asyncio.run(acapture_cached(eval_lab, reqs[:1], kb, params.with_changes(vector_threshold=0.35)))
        with_history = [CaptureRequest(reqs[0].qid, reqs[0].question, (("an earlier question", "its answer"),))]
        asyncio.run(acapture_cached(eval_lab, with_history, kb, params))
        assert len(asked) == 6 and handle.cache.entries(CAPTURE_STAGE) == 6
        # the same history again: read back
        asyncio.run(acapture_cached(eval_lab, with_history, kb, params))
        assert len(asked) == 6
    finally:
        handle.disable()


@contextlib.contextmanager
def _lab_with(tmp_path: Any, kb: str, texts: dict[str, str]) -> Iterator[Any]:
    """A fresh offline lab holding ``texts`` (document id → text) in ``kb``."""
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        lab.ingest_documents([{"id": i, "text": t} for i, t in texts.items()], kb=kb, progress=False)
        yield lab
    finally:
        lab.workspace.close()


def test_bm25_settings_and_kb_content_change_the_key(tmp_path: Any, monkeypatch: Any) -> None:
    from rag_lab.eval.cache import Bm25IndexCache, use_bm25_settings

    texts = {
        "paris": "Paris is the capital of France. It lies on the Seine.",
        "berlin": "Berlin is the capital of Germany and its largest city.",
        "seine": "The Seine flows through Paris into the English Channel.",
    }
    with _lab_with(tmp_path, "notes", texts) as lab:
        handle = enable_stage_cache(lab, tmp_path / "cache")
        try:
            asked = _count_asks(lab, monkeypatch)
            req = [CaptureRequest("q1", "Which river flows through Paris?")]
            asyncio.run(acapture_cached(lab, req, "notes", lab.params))
            asyncio.run(acapture_cached(lab, req, "notes", lab.params))
            assert len(asked) == 1
            use_bm25_settings(lab, "notes", Bm25IndexCache(handle.cache), k1=0.9, b=0.4, method="robertson")
            asyncio.run(acapture_cached(lab, req, "notes", lab.params))
            assert len(asked) == 2  # another BM25 index: another capture
            lab.ingest_documents(
                [{"id": "loire", "text": "The Loire is the longest river of France."}], kb="notes", progress=False
            )
            asyncio.run(acapture_cached(lab, req, "notes", lab.params))
            assert len(asked) == 3  # the KB's content changed
        finally:
            handle.disable()


def test_failed_captures_are_not_stored(eval_lab: Any, small_spec: Any, tmp_path: Any, monkeypatch: Any) -> None:
    from rag_lab.tuning.inputs import QuestionInputs

    handle = enable_stage_cache(eval_lab, tmp_path / "cache")
    try:

        async def failing(lab: Any, questions: Any, kb: Any, params: Any = None, store_memo: Any = None) -> list[Any]:
            return [
                QuestionInputs(q.qid, q.question, False, [], [], None, False, False, 0.2, 30, store_memo, error="boom")
                for q in questions
            ]

        monkeypatch.setattr("rag_lab.tuning.capture.acapture_questions", failing)
        out = asyncio.run(
            acapture_cached(eval_lab, [CaptureRequest("q", "anything")], small_spec.kb_name, eval_lab.params)
        )
        assert out[0].error == "boom" and handle.cache.entries(CAPTURE_STAGE) == 0
    finally:
        handle.disable()


def test_swapped_bm25_settings_stay_in_place_until_released(tmp_path: Any) -> None:
    """Regression: the index ``use_bm25_settings`` put in place was dropped as stale on the next
    access (its version is not the KB's stored one), so a BM25 sweep searched with the KB's own
    settings for every value."""
    from rag_lab.eval.cache import Bm25IndexCache, StageCache, use_bm25_settings

    texts = {
        "a": "river river river boats on the river",
        "b": "a river and a long quiet valley with farms and villages and roads",
        "c": "mountains and snow",
        "d": "a desert at noon",
    }
    with _lab_with(tmp_path, "k", texts) as lab:
        ws = lab.workspace
        kb = ws.get_kb("k")
        own = dict(ws.keyword_index(kb).search("river boats valley", 3))
        use_bm25_settings(lab, "k", Bm25IndexCache(StageCache(tmp_path / "c")), k1=0.3, b=0.0, method="robertson")
        for _ in range(2):  # not dropped on the next accesses
            assert ws.keyword_index(kb).params["k1"] == 0.3 and ws.keyword_index(kb).params["b"] == 0.0
        swapped = dict(ws.keyword_index(kb).search("river boats valley", 3))
        assert swapped.keys() == own.keys() and swapped != own  # other settings, other scores
        ws.use_keyword_index(kb, None)
        assert (
            ws.keyword_index(kb).params["k1"] == 1.5
            and dict(ws.keyword_index(kb).search("river boats valley", 3)) == own
        )
