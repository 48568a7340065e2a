"""Concurrent evaluation against models behind HTTP: the same questions one at a time vs at the
default concurrency, with an OpenAI-compatible chat endpoint and a Jina-style /rerank endpoint of
fixed latency (the tests' fake server on loopback, every reply delayed).

Usage: .venv/bin/python benchmarks/concurrency.py [N_QUESTIONS] [LATENCY_S]

Prints ``concurrency: sequential X s, concurrent (N) Y s (R× faster; goal >= 4×)`` and asserts
that both evaluations give the same records (timings aside). Default 100 questions of
``hotpotqa_hipporag100`` (its first 100 and their gold documents plus distractors), 0.2 s per call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.models.fake_openai import FakeOpenAIServer, RecordedRequest, Reply  # noqa: E402


class LatencyServer(FakeOpenAIServer):
    """Every reply (the fake's defaults) waits ``latency`` seconds first; each reply's path and
    status are kept (a benchmark whose calls fail measures a pipeline without its models)."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency
        self.replies: list[tuple[str, int]] = []

    def _default_reply(self, req: RecordedRequest) -> Reply:
        reply = dataclasses.replace(super()._default_reply(req), delay=self.latency)
        self.replies.append((req.path, reply.status))
        return reply


def _strip(res: Any) -> list[dict[str, Any]]:
    out = []
    for r in res.records:
        d = r.to_dict()
        d.pop("latency_ms", None)
        d.pop("stage_ms", None)
        # the fake chat endpoint echoes the prompt, whose runtime metadata holds the clock
        d["answer"] = re.sub(r"Current time: [^\n]*", "", d["answer"])
        out.append(d)
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    from rag_lab.eval.datasets import load_dataset
    from rag_lab.eval.runner import default_concurrency, evaluate_lab, ingest_dataset
    from rag_lab.lab import Lab

    ds = load_dataset("hotpotqa_hipporag100").subset(n, max_docs=max(2 * n + 20, 60))
    with LatencyServer(latency) as srv, tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "workspace": tmp,
            "models": {
                "chat": {"type": "openai", "model": "fake", "base_url": srv.base_url, "max_retries": 0},
                # the client posts to {base_url}/rerank: /v1/rerank on the fake
                "reranker": {"type": "http", "model": "fake-rerank", "base_url": srv.base_url},
            },
        }
        lab = Lab.from_config(cfg)
        ingest_dataset(lab, ds, "bench", progress=False)
        level = default_concurrency(lab)
        t0 = time.perf_counter()
        seq = asyncio.run(evaluate_lab(lab, ds, "bench", progress=False, concurrency=1))
        t_seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        par = asyncio.run(evaluate_lab(lab, ds, "bench", progress=False))
        t_par = time.perf_counter() - t0
        assert _strip(seq) == _strip(par), "concurrent records differ from the sequential ones"
        calls = len(srv.requests)
        failed = [(path, status) for path, status in srv.replies if status >= 400]
        assert not failed, f"{len(failed)} model calls failed (e.g. {failed[0]}): the benchmark would time no model"
        reranks = sum(1 for path, _ in srv.replies if path.endswith("/rerank"))
        assert reranks >= 2 * n, f"{reranks} rerank calls for {n} questions run twice: the reranker was not called"
        print(f"{n} questions, {latency * 1000:.0f} ms per model call, {calls} calls in all ({reranks} rerank)")
        print(
            f"concurrency: sequential {t_seq:.1f} s, concurrent ({level}) {t_par:.1f} s "
            f"({t_seq / t_par:.1f}× faster; goal >= 4×); records identical"
        )


if __name__ == "__main__":
    main()
