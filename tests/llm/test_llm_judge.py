"""End to end against llama-server + SmolLM2-135M-Instruct behind the OpenAI API: the json_schema
response format of query understanding, a streamed answer with citations resolved, usage tokens
in the ledger, and the ragas LLM metrics giving numbers or NaN with a reason — each call bounded
in time. Timings are printed (``-s``) and recorded in docs/evaluation.md."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.judge_server import LlamaServer
from rag_lab.lab import Lab

CALL_BOUND_S = 60.0  # every model call of these tests must finish within this


@pytest.fixture(scope="module")
def llm_lab(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory, docs_dir: Path) -> Any:
    cfg = llama.config()
    cfg["models"]["chat"]["timeout"] = CALL_BOUND_S
    cfg["models"]["embedder"] = {"type": "onnx-minilm"}
    cfg["models"]["reranker"] = {"type": "embedding-rescorer"}
    cfg["params"] = {"max_completion_tokens": 160, "query_understand_timeout_s": CALL_BOUND_S, "rerank_top_k": 3}
    lab = Lab.from_config(cfg, workspace=tmp_path_factory.mktemp("llm_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    yield lab
    lab.workspace.close()


def _timed(label: str, t0: float) -> float:
    dt = time.perf_counter() - t0
    print(f"[timing] {label}: {dt:.1f} s")
    return dt


def test_server_starts_on_loopback(llama: LlamaServer) -> None:
    assert llama.base_url.startswith("http://127.0.0.1:")
    print(f"[timing] llama-server start-up to /health: {llama.startup_s:.1f} s")  # type: ignore[attr-defined]


def test_query_understanding_json_schema_and_streamed_answer(llm_lab: Any) -> None:
    t0 = time.perf_counter()
    run = llm_lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    total = _timed("ask (query understanding + streamed answer)", t0)
    diag = run.state("query_understand").state.diagnostics["query_understand"]
    # the json_schema response format makes even the 135M model reply with the object
    assert diag.get("error") is None, diag
    assert diag["parsed"] is not None, diag  # an object came back (complete, or cut and recovered)
    print(f"[qu] finish={diag['finish_reason']} raw={diag['raw'][:160]!r} rejected={diag.get('rewrite_rejected')}")
    if diag["finish_reason"] not in ("length", "max_tokens"):
        assert set(json.loads(diag["raw"])) == {"rewrite_query", "intent", "image_description"}
    else:  # cut by the token cap: a prefix of the schema's object, read by the recovery parser
        assert diag["raw"].lstrip().startswith('{"rewrite_query"') or diag["raw"].lstrip().startswith("{\n")
    from rag_lab.types.intent import QueryIntent

    assert diag["parsed"]["intent"] in {i.value for i in QueryIntent if i.value}  # the schema's enum
    qu = run.state("query_understand").state
    assert qu.rewrite_query.strip()  # the model's rewrite, or the original when it was rejected
    assert diag["parsed"]["intent"] not in ("web_search", "image_only", "doc_only")  # not offered
    # the answer path, retrieval guaranteed (the tiny model's intent may skip it): no rewrite
    t0 = time.perf_counter()
    run = llm_lab.ask("Who built the Brightwater lighthouse?", kb="demo", params={"enable_rewrite": False})
    _timed("ask (streamed answer, rewrite off)", t0)
    # streamed: several answer events, completed, no error
    answers = [e for e in run.events if e.type == "answer"]
    assert len(answers) > 2 and answers[-1].done and not run.error
    assert run.answer.strip() and run.references
    # citations: every tag in the answer names a chunk of the references (aliases were resolved)
    ref_ids = {r.id for r in run.references}
    for chunk_id in re.findall(r'chunk_id="([^"]+)"', run.answer):
        assert chunk_id in ref_ids
    # usage tokens from the server, not estimates; every call bounded in time
    chat_calls = [c for c in run.ledger.calls if c.kind == "chat"]
    assert len(chat_calls) == 1
    for c in chat_calls:
        assert not c.estimated and c.tokens_in > 0 and c.tokens_out > 0 and not c.error, c
        assert c.ms < CALL_BOUND_S * 1000
        print(f"[timing] {c.stage}: {c.ms / 1000:.1f} s, {c.tokens_in} tokens in, {c.tokens_out} out")
    assert total < CALL_BOUND_S + 30


def test_judge_metrics_give_numbers_or_nan_with_a_reason(llama: LlamaServer, llm_lab: Any) -> None:
    from rag_lab.asyncutil import run_sync as _run_sync
    from rag_lab.eval.ragas_adapter import JudgeConfig, RagasSample, ascore_samples
    from rag_lab.observability.ledger import Ledger

    judge = JudgeConfig.from_mapping(
        {**llama.config()["models"]["judge"], "timeout": CALL_BOUND_S, "max_tokens": 384, "concurrency": 1}
    )
    samples = [
        RagasSample(
            "q1",
            "Who built the Brightwater lighthouse?",
            ["The Brightwater lighthouse was built in 1874 by the engineer Mara Quill."],
            ["d1"],
            "Mara Quill",
            ["d1"],
            [],
            "The lighthouse was built by Mara Quill.",
        ),
        RagasSample(
            "q2",
            "What makes sourdough rise?",
            ["Sourdough bread rises thanks to a starter of wild yeast."],
            ["d2"],
            "wild yeast",
            ["d2"],
            [],
            "A starter of wild yeast.",
        ),
    ]
    ledger = Ledger()
    t0 = time.perf_counter()
    r = _run_sync(
        lambda: ascore_samples(samples[:1], ["faithfulness", "llm_context_precision"], judge, llm_lab.embedder, ledger)
    )
    _timed("2 judge metrics x 1 sample", t0)
    for m in r.metrics:
        for qid, v in zip(r.qids, r.values[m]):
            if math.isfinite(v):
                assert 0.0 <= v <= 1.0, (m, qid, v)
            else:
                assert r.reasons[m][qid], (m, qid)  # NaN always comes with its reason
        print(f"[judge] {m}: {r.values[m]} reasons={r.reasons.get(m, {})}")
    calls = [c for c in ledger.calls if c.kind == "judge"]
    assert calls and r.judge["calls"] == len(calls)
    assert all(c.ms < CALL_BOUND_S * 1000 for c in calls)
    ok = [c for c in calls if not c.error]
    assert ok and all(c.tokens_in > 0 and not c.estimated for c in ok)
    print(
        f"[timing] judge: {len(calls)} calls ({r.judge['failed']} failed), "
        f"mean {sum(c.ms for c in calls) / len(calls) / 1000:.1f} s per call"
    )
