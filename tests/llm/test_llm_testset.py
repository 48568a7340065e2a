"""``rag-lab testset --generator llm`` against the real llama-server (SmolLM2-135M) through the lab's
``models.chat``: the whole path — prompts, JSON mode, parsing, filters, answers, multi-hop over the
entity graph — runs on a real model, its replies asked as bounded json_schema (llama-server) at
temperature 0 and a fixed seed. The 135M model writes poor questions, but at least one survives
the filters with full provenance; every other prompt ends as a counted drop or error, never a
crash. Timings are printed (``-s``), never asserted."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.judge_server import LlamaServer
from rag_lab.eval.testset import build_llm_testset
from rag_lab.lab import Lab

CALL_TIMEOUT_S = 120.0  # a hung server fails the test instead of hanging it


@pytest.fixture(scope="module")
def gen_lab(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory, docs_dir: Path) -> Any:
    cfg = llama.config()
    cfg["models"]["chat"].update(timeout=CALL_TIMEOUT_S, timeout_s=CALL_TIMEOUT_S, extra_body={"seed": 0})
    cfg["models"]["embedder"] = {"type": "onnx-minilm"}
    cfg["models"]["reranker"] = {"type": "embedding-rescorer"}
    lab = Lab.from_config(cfg, workspace=tmp_path_factory.mktemp("llm_testset_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    yield lab
    lab.workspace.close()


def test_llm_testset_on_the_real_model(gen_lab: Any, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    ds, report = build_llm_testset(
        gen_lab, "demo", 4, tmp_path / "out", gen_lab.chat_model, seed=1, multihop=0.25,
        timeout=CALL_TIMEOUT_S, retries=0, concurrency=1,
    )  # fmt: skip
    print(f"[timing] testset --generator llm, 4 asked: {time.perf_counter() - t0:.1f} s; {report}")
    assert report.kept >= 1 and len(ds.queries) == report.kept, report
    assert report.model_calls >= report.kept * 2  # a question and an answer per kept one
    for q in ds.queries:
        md = q.metadata
        assert md["model"] == gen_lab.chat_model.model and md["seed"] == 1
        assert md["synthetic"] is True and md["reviewed"] is False
        assert re.fullmatch(r"[0-9a-f]{16}", md["prompt_hash"])
        assert q.question.strip() and q.answers and q.gold_ids
        assert len(q.gold_ids) == (2 if md["generator"] == "llm-multihop" else 1)
