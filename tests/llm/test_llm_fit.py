"""What rag_lab sends with default params fits the server `rag-lab judge serve` starts: a question
on a KB of the project's own docs gets a real streamed answer from llama-server, not a
context-overflow error. Only temperature (0) and the seed differ from the defaults, for the same
outcome on every run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.judge_server import DEFAULT_CTX, LlamaServer
from rag_lab.lab import Lab
from rag_lab.types.params import PipelineParams

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def docs_lab(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cfg = llama.config()
    cfg["models"]["chat"].update(timeout=600.0, extra_body={"seed": 0})  # timeout_s: the config's
    cfg["models"]["embedder"] = {"type": "onnx-minilm"}
    cfg["models"]["reranker"] = {"type": "embedding-rescorer"}
    cfg["params"] = {"temperature": 0.0, "query_understand_temperature": 0.0}
    lab = Lab.from_config(cfg, workspace=tmp_path_factory.mktemp("llm_docs_ws"))
    lab.ingest(DOCS, kb="docs", progress=False)
    yield lab
    lab.workspace.close()


def test_default_params_on_the_docs_kb_fit_the_server(llama: LlamaServer, docs_lab: Any) -> None:
    assert llama.ctx_size == DEFAULT_CTX
    t0 = time.perf_counter()
    run = docs_lab.ask(
        "How does the rerank stage decide which passages to keep?", kb="docs", params={"enable_rewrite": False}
    )
    print(f"[timing] ask on the docs KB, default params: {time.perf_counter() - t0:.1f} s")
    assert not run.error, run.error
    assert not run.is_fallback and run.answer.strip()
    (call,) = [c for c in run.ledger.calls if c.kind == "chat"]
    print(f"[fit] {len(run.references)} references, {call.tokens_in} tokens in, {call.tokens_out} out")
    assert not call.error and not call.estimated and call.tokens_in > 0
    cap = PipelineParams().max_completion_tokens
    assert call.tokens_in + cap <= DEFAULT_CTX, (call.tokens_in, cap, DEFAULT_CTX)
