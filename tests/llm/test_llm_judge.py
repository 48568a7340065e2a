"""End to end against llama-server + SmolLM2-135M-Instruct behind the OpenAI API: the bounded
json_schema of query understanding gives a parsed object, a streamed answer with citations
resolved, usage tokens in the ledger, and the ragas LLM metrics (bounded json_schema replies) give
numbers. Every call runs at temperature 0 with a fixed seed, so the outcomes are the same on every
run; they are failures here when the model path breaks, not NaN with a reason. Timings are printed
(``-s``), never asserted."""

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

CALL_TIMEOUT_S = 120.0  # a hung server fails the test instead of hanging it; not a speed claim
DETERMINISTIC = {"temperature": 0.0, "query_understand_temperature": 0.0}


@pytest.fixture(scope="module")
def llm_lab(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory, docs_dir: Path) -> Any:
    cfg = llama.config()
    cfg["models"]["chat"].update(timeout=CALL_TIMEOUT_S, timeout_s=CALL_TIMEOUT_S, extra_body={"seed": 0})
    cfg["models"]["embedder"] = {"type": "onnx-minilm"}
    cfg["models"]["reranker"] = {"type": "embedding-rescorer"}
    cfg["params"] = {
        **DETERMINISTIC,
        "max_completion_tokens": 160,
        "query_understand_timeout_s": CALL_TIMEOUT_S,
        "rerank_top_k": 3,
    }
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
    from rag_lab.types.intent import QueryIntent

    t0 = time.perf_counter()
    run = llm_lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    _timed("ask (query understanding + streamed answer)", t0)
    diag = run.state("query_understand").state.diagnostics.get("query_understand")
    assert diag is not None, "query understanding did not run"
    assert not diag.get("error"), f"the query-understanding call failed: {diag.get('error')}"
    raw, finish = diag.get("raw") or "", diag.get("finish_reason")
    print(f"[qu] finish={finish} raw={raw[:200]!r} rejected={diag.get('rewrite_rejected')}")
    # the bounded schema closes the object within the token cap: a whole object, parsed
    assert diag.get("parsed") is not None, f"no query-understanding object (finish_reason={finish!r}, raw={raw!r})"
    assert finish == "stop", f"the reply was cut (finish_reason={finish!r}) although its strings are bounded: {raw!r}"
    assert set(json.loads(raw)) == {"rewrite_query", "intent", "image_description"}
    parsed = diag["parsed"]
    offered = {i.value for i in QueryIntent if i.value} - {"web_search", "image_only", "doc_only"}
    assert parsed["intent"] in offered, parsed  # the schema's enum, as the request allows
    assert parsed["image_description"] == ""  # no image: maxLength 0
    assert run.state("query_understand").state.rewrite_query.strip()
    # the answer path, retrieval guaranteed (the tiny model's intent may skip it): no rewrite
    t0 = time.perf_counter()
    run = llm_lab.ask("Who built the Brightwater lighthouse?", kb="demo", params={"enable_rewrite": False})
    _timed("ask (streamed answer, rewrite off)", t0)
    # streamed: several answer events, completed, no error
    answers = [e for e in run.events if e.type == "answer"]
    assert len(answers) > 2 and answers[-1].done and not run.error, run.error
    assert run.answer.strip() and run.references
    # citations: every tag in the answer names a chunk of the references (aliases were resolved)
    ref_ids = {r.id for r in run.references}
    for chunk_id in re.findall(r'chunk_id="([^"]+)"', run.answer):
        assert chunk_id in ref_ids
    # usage tokens from the server, not estimates
    chat_calls = [c for c in run.ledger.calls if c.kind == "chat"]
    assert len(chat_calls) == 1
    for c in chat_calls:
        assert not c.estimated and c.tokens_in > 0 and c.tokens_out > 0 and not c.error, c
        print(f"[timing] {c.stage}: {c.ms / 1000:.1f} s, {c.tokens_in} tokens in, {c.tokens_out} out")


JUDGE_SAMPLES = [
    (
        "q1",
        "Who built the Brightwater lighthouse?",
        ["The Brightwater lighthouse was built in 1874 by the engineer Mara Quill."],
        "Mara Quill",
        "The lighthouse was built by Mara Quill.",
    ),
    (
        "q2",
        "What makes sourdough rise?",
        ["Sourdough bread rises thanks to a starter of wild yeast."],
        "wild yeast",
        "A starter of wild yeast.",
    ),
]


def test_judge_metrics_give_numbers_for_every_question(llama: LlamaServer, llm_lab: Any) -> None:
    from rag_lab.asyncutil import run_sync as _run_sync
    from rag_lab.eval.ragas_adapter import JudgeConfig, RagasSample, ascore_samples
    from rag_lab.eval.ragas_adapter.judge import resolve_structured_output
    from rag_lab.observability.ledger import Ledger

    judge = JudgeConfig.from_mapping(
        {**llama.config()["models"]["judge"], "timeout": CALL_TIMEOUT_S, "max_tokens": 512, "concurrency": 1}
    )
    assert (judge.temperature, judge.seed) == (0.0, 0)
    assert resolve_structured_output(judge) == "json_schema"  # llama-server answers /props
    samples = [
        RagasSample(q, question, ctx, ["d"], ref, ["d"], [], resp) for q, question, ctx, ref, resp in JUDGE_SAMPLES
    ]
    metrics = ["faithfulness", "llm_context_precision"]
    ledger = Ledger()
    t0 = time.perf_counter()
    r = _run_sync(lambda: ascore_samples(samples, metrics, judge, llm_lab.embedder, ledger))
    _timed(f"{len(metrics)} judge metrics x {len(samples)} samples", t0)
    nan = 0
    for m in r.metrics:
        print(f"[judge] {m}: {r.values[m]} reasons={r.reasons.get(m, {})}")
        for qid, v in zip(r.qids, r.values[m]):
            nan += not math.isfinite(v)
            if math.isfinite(v):
                assert 0.0 <= v <= 1.0, (m, qid, v)
    print(f"[judge] NaN: {nan} of {len(r.qids) * len(r.metrics)} scores")
    for i, qid in enumerate(r.qids):
        got = {m: r.values[m][i] for m in r.metrics}
        reasons = {m: r.reasons.get(m, {}).get(qid, "") for m in r.metrics}
        assert any(math.isfinite(v) for v in got.values()), f"{qid}: no judge number, only NaN: {reasons}"
    calls = [c for c in ledger.calls if c.kind == "judge"]
    # json_schema replies are asked once: statements + verdicts + one per context, per sample
    assert len(calls) == r.judge["calls"] == 3 * len(samples)
    assert all(not c.error and c.tokens_in > 0 and not c.estimated for c in calls), [c.error for c in calls]
    print(
        f"[timing] judge: {len(calls)} calls ({r.judge['failed']} failed), "
        f"mean {sum(c.ms for c in calls) / len(calls) / 1000:.1f} s per call"
    )
