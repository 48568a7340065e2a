"""Issue 23, finding 7: offline results never depend on the machine's load.

Time limits protect against remote endpoints; an in-process model that is slow is slow, not a
fallback (ARCHITECTURE.md, "Determinism"). The CPU hog here is an in-process model slowed down
(a sleep inside the offline re-scorer and the extractive answerer) with every stage timeout at its
floor: the answer, the rerank outcome and the scores are those of an unhurried run. A remote
reranker that sleeps (a loopback HTTP server) still times out and degrades as the spec says, with
a reason that names the stage, the param and the seconds.
"""

from __future__ import annotations

import asyncio
import sys
import time

import numpy as np
import pytest

from rag_lab.models.timeouts import ModelTimeout, call_with_timeout, is_in_process, timeout_for
from tests.models.fake_openai import FakeOpenAIServer, Reply

Q = "Who built the Brightwater lighthouse?"
#: every model timeout at its smallest allowed value (PipelineParams refuses < 0.1 s)
TINY = {
    "rerank_timeout_s": 0.1,
    "chat_stream_idle_timeout_s": 0.1,
    "query_understand_timeout_s": 0.1,
    "search_timeout_s": 0.1,
    "store_fanout_timeout_s": 0.1,
}
#: how long the slowed in-process models take per call: several times any TINY timeout
SLOW_S = 0.4


# -- the helper -------------------------------------------------------------------------------
async def test_in_process_calls_have_no_limit_and_remote_ones_name_stage_param_seconds():
    async def slow() -> str:
        await asyncio.sleep(0.2)
        return "done"

    assert await call_with_timeout(slow(), in_process=True, stage="rerank", param="rerank_timeout_s", seconds=0.01)
    with pytest.raises(ModelTimeout) as ei:
        await call_with_timeout(slow(), in_process=False, stage="rerank", param="rerank_timeout_s", seconds=0.01)
    assert str(ei.value) == "rerank: the model did not answer within rerank_timeout_s=0.01 s"
    assert isinstance(ei.value, TimeoutError) and (ei.value.stage, ei.value.param) == ("rerank", "rerank_timeout_s")

    async def own_timeout() -> None:
        raise TimeoutError("the client's own read timeout")

    with pytest.raises(TimeoutError, match="the client's own read timeout"):  # not relabelled
        await call_with_timeout(own_timeout(), in_process=False, stage="s", param="p", seconds=5)


def test_models_declare_where_they_run():
    from rag_lab.models.chat import OpenAIChatModel
    from rag_lab.models.embedding import CachedEmbedder, OpenAIEmbedder, shared_minilm
    from rag_lab.models.extractive import ExtractiveChatModel
    from rag_lab.models.rerank import EmbeddingReranker, HttpReranker
    from rag_lab.observability.ledger import LedgerReranker

    onnx = shared_minilm()
    local = [onnx, CachedEmbedder(onnx), EmbeddingReranker(onnx), ExtractiveChatModel(onnx)]
    assert all(is_in_process(m) for m in local) and is_in_process(LedgerReranker(EmbeddingReranker(onnx)))
    remote_embedder = OpenAIEmbedder("m", "http://127.0.0.1:9/v1", dimension=8)
    remote = [
        remote_embedder,
        HttpReranker("http://127.0.0.1:9", "m"),
        OpenAIChatModel("m", "http://127.0.0.1:9/v1"),
        EmbeddingReranker(remote_embedder),  # scores through a remote embedder: remote
        object(),  # a user's model without the attribute keeps its time limit
    ]
    assert not any(is_in_process(m) for m in remote)
    assert timeout_for(onnx, 60.0) is None and timeout_for(object(), 60.0) == 60.0


def test_openai_clients_import_their_libraries_when_built(monkeypatch):
    """A first ``import openai`` took 66 s on a loaded machine; inside a call it ran within the
    stage's timeout. Built, the model has it already: its calls import nothing."""
    from rag_lab.models import chat, rerank

    for name in ("openai", "httpx"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    model = chat.OpenAIChatModel("m", "http://127.0.0.1:9/v1")
    assert "openai" in sys.modules and "httpx" in sys.modules and model._openai is sys.modules["openai"]
    monkeypatch.delitem(sys.modules, "httpx")
    rr = rerank.HttpReranker("http://127.0.0.1:9", "m")
    assert rr._httpx is sys.modules["httpx"]


# -- the CPU hog --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def hog_lab(tmp_path_factory, docs_dir):
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("hog_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    yield lab
    lab.workspace.close()


def _outcome(run):
    rerank = run.state("chunk_rerank").state.diagnostics["rerank"]
    rows = [(r["id"], r["model_score"]) for r in rerank["rows"]]
    return run.answer, run.is_fallback, rerank["outcome"], rows, [r.id for r in run.references]


def test_slow_in_process_models_give_the_same_answer_under_tiny_timeouts(hog_lab, monkeypatch):
    from rag_lab.models.extractive import ExtractiveChatModel
    from rag_lab.models.rerank import EmbeddingReranker

    calm = _outcome(hog_lab.ask(Q, kb="demo"))
    assert calm[2] == "ok" and not calm[1]
    score, answer = EmbeddingReranker.score, ExtractiveChatModel.answer

    def slow_score(self, query, passages):
        time.sleep(SLOW_S)  # a loaded machine: the re-scorer's thread gets little CPU
        return score(self, query, passages)

    def slow_answer(self, messages):
        time.sleep(SLOW_S)
        return answer(self, messages)

    monkeypatch.setattr(EmbeddingReranker, "score", slow_score)
    monkeypatch.setattr(ExtractiveChatModel, "answer", slow_answer)
    loaded = _outcome(hog_lab.ask(Q, kb="demo", params=TINY))
    assert loaded == calm  # same answer, same rerank outcome and scores, not a fallback


def test_a_slow_remote_reranker_still_times_out_with_a_reason(hog_lab):
    from rag_lab.models.rerank import HttpReranker

    with FakeOpenAIServer() as srv:
        srv.script("/rerank", Reply.json({"results": []}, delay=2.0))
        old = hog_lab.services.rerank_models["rerank"]
        hog_lab.services.rerank_models["rerank"] = HttpReranker(srv.root_url, "slow", timeout=30)
        try:
            run = hog_lab.ask(Q, kb="demo", params={"rerank_timeout_s": 0.2})
        finally:
            hog_lab.services.rerank_models["rerank"] = old
    diag = run.state("chunk_rerank").state.diagnostics["rerank"]
    assert diag["outcome"] == "model_error"  # §4.6.1 6.2: the raw search order goes on
    assert diag["error"] == "ModelTimeout: rerank: the model did not answer within rerank_timeout_s=0.2 s"
    assert run.references and not run.is_fallback


# -- search -----------------------------------------------------------------------------------
async def test_fan_out_limits_remote_engines_only():
    from types import SimpleNamespace

    from rag_lab.retrieval.base import RetrieveResult
    from rag_lab.retrieval.hybrid_search import RetrievalRequest, StoreGroup, VectorStoreUnavailable, fan_out

    def group(key: str, local: bool) -> StoreGroup:
        engine = SimpleNamespace(in_process=local, engine_type="local" if local else "milvus")
        return StoreGroup(key, engine, [], [RetrievalRequest("keywords", [key], 5, 0.0, query="q")])

    async def slow(g: StoreGroup) -> list[RetrieveResult]:
        await asyncio.sleep(0.2)
        return [RetrieveResult([], g.key, "keywords", None)]

    out = await fan_out([group("a", True), group("b", True)], 4, 0.01, slow)
    assert [r.engine_type for r in out] == ["a", "b"]
    with pytest.raises(VectorStoreUnavailable) as ei:
        await fan_out([group("a", True), group("m", False)], 4, 0.01, slow)
    assert "store_fanout_timeout_s=0.01 s" in str(ei.value.__cause__) and "'m'" in str(ei.value.__cause__)


def test_the_offline_searcher_runs_in_process(hog_lab):
    from rag_lab.retrieval.base import SearchParams

    kb = hog_lab.workspace.get_kb("demo")
    assert hog_lab.services.searcher.runs_in_process(kb.id, SearchParams(query_text="q"))
    assert not hog_lab.services.searcher.runs_in_process("no-such-kb", SearchParams(query_text="q"))


# -- scores ----------------------------------------------------------------------------------
def test_a_passage_score_does_not_depend_on_the_other_passages():
    """BLAS ``M @ q`` rounds a row differently with the matrix's row count (0.76097113 vs
    0.76097125 for one stored score); the re-scorer's cosines are row-by-row."""
    from rag_lab.models.rerank import EmbeddingReranker

    rng = np.random.default_rng(7)
    table = {f"t{i}": v / np.linalg.norm(v) for i, v in enumerate(rng.standard_normal((41, 384)).astype(np.float32))}

    class Table:
        model_key = "table"
        dimension = 384
        in_process = True

        def embed(self, texts):
            return np.stack([table[t] for t in texts])

    rr = EmbeddingReranker(Table())
    passages = [f"t{i}" for i in range(1, 41)]
    full = {s.index: s.relevance_score for s in rr.score("t0", passages)}
    for n in range(1, 41):
        part = {s.index: s.relevance_score for s in rr.score("t0", passages[:n])}
        assert part == {i: full[i] for i in range(n)}, n
