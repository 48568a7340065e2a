"""The cold path: vectors computed once per (model, text) across labs over one workspace, eval
turns kept out of sessions.sqlite, the answer model's time in its stage, ``rag-lab cache``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_lab.eval.runner import SuiteSpec, evaluate_lab, ingest_dataset

TINY = ("hotpotqa_hipporag100", 3, 8)  # 3 questions, their 6 gold documents + 2 distractors


class CountingEmbedder:
    """Passes texts to the real embedder and counts each one."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_key, self.dimension = inner, inner.model_key, inner.dimension
        self.counts: dict[str, int] = {}

    def embed(self, texts: Any) -> np.ndarray:
        for t in texts:
            self.counts[t] = self.counts.get(t, 0) + 1
        return self.inner.embed(texts)


def _messages(ws: Path) -> int:
    with sqlite3.connect(ws / "sessions.sqlite") as conn:
        return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def _per_question(result: Any) -> list[tuple[Any, ...]]:
    return [
        (r.qid, r.answer, r.retrieved_doc_ids, r.context_ids, r.context_scores, r.is_fallback, r.error)
        for r in result.records
    ]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, str]:
    from rag_lab.lab.lab import Lab

    spec = SuiteSpec(*TINY)
    ds = spec.load()
    ws = tmp_path_factory.mktemp("cold_ws")
    lab = Lab.from_config(workspace=ws)
    report = ingest_dataset(lab, ds, spec.kb_name)
    assert report.texts_prepared > report.vectors_added  # model passages and sentences too
    lab.workspace.close()
    return ws, ds, spec.kb_name


async def test_cold_and_warm_evals_agree_and_the_new_lab_computes_nothing(tiny: tuple[Path, Any, str]) -> None:
    from rag_lab.lab.lab import Lab

    ws, ds, kb = tiny
    cold = Lab.from_config(workspace=ws)
    counter = CountingEmbedder(cold.embedder.inner.embedder)
    cold.embedder.inner.embedder = counter
    first = await evaluate_lab(cold, ds, kb, progress=False)
    # every question embedded exactly once, though search, re-scorer and answerer all embed it
    assert all(counter.counts.get(q.question) == 1 for q in ds.queries)
    # the passages the re-scorer scores were embedded at ingest
    assert cold.embedder.inner.store_hits > 0
    warm = Lab.from_config(workspace=ws)  # new cache objects over the same workspace: a new process
    second = await evaluate_lab(warm, ds, kb, progress=False)
    assert _per_question(second) == _per_question(first)
    assert warm.embedder.inner.misses == 0  # every vector came from the workspace's cache
    off = Lab.from_config({"vector_cache": False}, workspace=ws)
    assert off.vector_cache is None and off.embedder.inner.store is None
    # eval turns are not stored by default; with keep_sessions they are (a user and an assistant message)
    assert _messages(ws) == 0
    await evaluate_lab(warm, ds, kb, n_queries=1, progress=False, keep_sessions=True)
    assert _messages(ws) == 2


async def test_the_answer_models_time_shows_in_its_stage(tiny: tuple[Path, Any, str]) -> None:
    from rag_lab.lab.lab import Lab

    ws, ds, kb = tiny
    lab = Lab.from_config({"vector_cache": False}, workspace=ws)  # the answerer embeds its sentences now
    run = await lab.aask(ds.queries[0].question, kb=kb, snapshots=False, persist=False)
    chat_calls = [c for c in run.ledger.calls if c.kind == "chat"]
    assert len(chat_calls) == 1 and chat_calls[0].stage == "chat_completion_stream"
    timing = next(t for t in run.timings if t.event == "chat_completion_stream")
    assert timing.background_ms > 0 and timing.duration_ms >= chat_calls[0].ms
    assert run.ledger.stage_ms["chat_completion_stream"] == timing.duration_ms
    frame = run.timings_frame()  # (StageTiming has slots: no __dict__ to build it from)
    assert frame.set_index("event").loc["chat_completion_stream", "background_ms"] == timing.background_ms


def test_cache_stats_and_clear_commands(tiny: tuple[Path, Any, str], tmp_path: Path, capsys: Any) -> None:
    import shutil

    from rag_lab.cli import main

    ws = tmp_path / "ws"
    shutil.copytree(tiny[0], ws)
    from rag_lab.eval.cache import StageCache

    stage_cache = StageCache(ws / "stage_cache")
    stage_cache.put("search", {"q": 1}, {})
    stage_cache.close()
    assert main(["--workspace", str(ws), "cache", "stats"]) == 0
    out = capsys.readouterr().out
    assert f"vector cache: {ws / 'vectors.sqlite'}: " in out and " MB of 1024.0 MB (" in out
    assert "  all-MiniLM-L6-v2-int8|local|code:" in out  # the model key, and the code that filed the vectors
    assert f"stage cache: {ws / 'stage_cache'}: 1 entries (search 1), 0.0 MB of 2048.0 MB" in out
    assert main(["--workspace", str(ws), "cache", "clear", "--model", "other|key"]) == 0
    assert "removed 0 vectors of 'other|key'" in capsys.readouterr().out
    assert main(["--workspace", str(ws), "cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "vector cache: removed " in out and "stage cache: removed " in out and "(1 entries)" in out
    assert main(["--workspace", str(ws), "cache", "stats", "--json"]) == 0
    assert '"rows": 0' in capsys.readouterr().out and not (ws / "stage_cache").exists()


def test_cache_warm_fills_the_cache_for_a_kb_ingested_without_it(tmp_path: Path, capsys: Any) -> None:
    from rag_lab.cli import main
    from rag_lab.lab.lab import Lab
    from rag_lab.models.vector_cache import VectorCache

    ds = SuiteSpec(*TINY).load()
    docs = [{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus[:3]]
    before = Lab.from_config({"vector_cache": False}, workspace=tmp_path)
    report = before.ingest_documents(docs, kb="old", progress=False)
    assert report.texts_prepared == 0 and not (tmp_path / "vectors.sqlite").exists()
    before.workspace.close()
    assert main(["--workspace", str(tmp_path), "cache", "warm", "--kb", "old"]) == 0
    out = capsys.readouterr().out
    assert f"old: {report.vectors_added} vectors copied from its index, " in out and " texts embedded" in out
    lab = Lab.from_config(workspace=tmp_path)
    chunks = lab.workspace.store.list_chunks(lab.workspace.get_kb("old").id)
    texts = [c.content for c in chunks]
    cached = VectorCache(tmp_path / "vectors.sqlite").get_many(lab.embedder.store_key, texts)
    fresh = lab.embedder.inner.embedder.embed(texts)
    assert all(v is not None and np.array_equal(v.view(np.uint32), f.view(np.uint32)) for v, f in zip(cached, fresh))
    lab.ask(ds.queries[0].question, kb="old", snapshots=False, persist=False)
    assert lab.embedder.inner.misses <= 2  # the question (and at most a sentence across a chunk seam)
