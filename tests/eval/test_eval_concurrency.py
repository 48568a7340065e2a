"""Concurrent evaluation: questions in flight at once give the same records, in question order, as
one after the other (hypothesis over the level), the default level follows where the models run,
and a slow remote model is called N at a time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.runner import REMOTE_CONCURRENCY, default_concurrency, evaluate_lab

pytestmark = pytest.mark.slow

#: what differs between two runs of the same question by design: its wall time
_TIMING = ("latency_ms", "stage_ms")


def _records(res: Any) -> list[dict[str, Any]]:
    out = []
    for r in res.records:
        d = r.to_dict()
        for k in _TIMING:
            d.pop(k, None)
        out.append(d)
    return out


@pytest.fixture(scope="module")
def sequential(eval_lab: Any, small_ds: Any, small_spec: Any) -> list[dict[str, Any]]:
    res = asyncio.run(evaluate_lab(eval_lab, small_ds, small_spec.kb_name, progress=False, concurrency=1))
    assert [r.qid for r in res.records] == [q.id for q in small_ds.queries]
    return _records(res)


@settings(max_examples=4)
@given(st.integers(2, 12))
def test_any_concurrency_gives_the_sequential_records(
    eval_lab: Any, small_ds: Any, small_spec: Any, sequential: list[dict[str, Any]], n: int
) -> None:
    res = asyncio.run(evaluate_lab(eval_lab, small_ds, small_spec.kb_name, progress=False, concurrency=n))
    assert _records(res) == sequential
    assert res.summary() == evaluate_retrieval_summary(sequential)


def evaluate_retrieval_summary(records: list[dict[str, Any]]) -> dict[str, float]:
    from rag_lab.eval.metrics import evaluate_retrieval

    return evaluate_retrieval(
        {r["qid"]: r["retrieved_doc_ids"] for r in records}, {r["qid"]: set(r["gold_ids"]) for r in records}
    ).summary()


class _SlowRemoteReranker:
    """The lab's reranker behind 50 ms of network latency (not in process): counts calls in flight."""

    in_process = False

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.in_flight = 0
        self.most = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def rerank(self, query: str, passages: Any) -> Any:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.05)
            return await self.inner.rerank(query, passages)
        finally:
            self.in_flight -= 1


def test_a_remote_model_is_called_n_at_a_time_with_the_same_results(
    eval_lab: Any, small_ds: Any, small_spec: Any, sequential: list[dict[str, Any]]
) -> None:
    from rag_lab.lab.lab import RERANK_MODEL_ID

    assert default_concurrency(eval_lab) == 1  # every offline model runs in this process
    models = eval_lab.services.rerank_models
    real, real_attr = models[RERANK_MODEL_ID], eval_lab.reranker
    slow = _SlowRemoteReranker(real)
    models[RERANK_MODEL_ID], eval_lab.reranker = slow, slow
    try:
        assert default_concurrency(eval_lab) == REMOTE_CONCURRENCY
        res = asyncio.run(evaluate_lab(eval_lab, small_ds, small_spec.kb_name, progress=False, concurrency=4))
    finally:
        models[RERANK_MODEL_ID], eval_lab.reranker = real, real_attr
    assert slow.most == 4  # four questions waited on the remote model at once
    assert _records(res) == sequential
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        asyncio.run(evaluate_lab(eval_lab, small_ds, small_spec.kb_name, progress=False, concurrency=0))
