"""``rag-lab testset --generator llm`` against the real llama-server (SmolLM2-135M) through the lab's
``models.chat``: the whole path — prompts, JSON mode, parsing, filters, answers, multi-hop over the
entity graph — runs on a real model, each call bounded in time. The 135M model writes poor
questions; what is checked is that every prompt ends as a kept question with full provenance, a
counted drop or a counted error, never a crash. Timings are printed (``-s``)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.judge_server import LlamaServer
from rag_lab.eval.testset import build_llm_testset
from rag_lab.lab import Lab

CALL_BOUND_S = 60.0


@pytest.fixture(scope="module")
def gen_lab(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory, docs_dir: Path) -> Any:
    cfg = llama.config()
    cfg["models"]["chat"]["timeout"] = CALL_BOUND_S
    cfg["models"]["embedder"] = {"type": "onnx-minilm"}
    cfg["models"]["reranker"] = {"type": "embedding-rescorer"}
    lab = Lab.from_config(cfg, workspace=tmp_path_factory.mktemp("llm_testset_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    yield lab
    lab.workspace.close()


def test_llm_testset_on_the_real_model(gen_lab: Any, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    try:
        ds, report = build_llm_testset(
            gen_lab, "demo", 4, tmp_path / "out", gen_lab.chat_model, seed=1, multihop=0.25,
            timeout=CALL_BOUND_S, retries=0, concurrency=1,
        )  # fmt: skip
    except ValueError as exc:  # the tiny model may write nothing that survives: said, not crashed
        assert "no question survived the filters" in str(exc)
        print(f"[testset-llm] nothing kept: {exc}")
        return
    dt = time.perf_counter() - t0
    print(f"[timing] testset --generator llm, 4 asked: {dt:.1f} s; {report}")
    assert report.model_calls >= report.kept * 2  # a question and an answer per kept one
    assert dt < report.model_calls * CALL_BOUND_S + 60
    for q in ds.queries:
        md = q.metadata
        assert md["model"] == gen_lab.chat_model.model and md["seed"] == 1
        assert md["synthetic"] is True and md["reviewed"] is False
        assert re.fullmatch(r"[0-9a-f]{16}", md["prompt_hash"])
        assert q.question.strip() and q.answers and q.gold_ids
        assert len(q.gold_ids) == (2 if md["generator"] == "llm-multihop" else 1)
