"""Ingest throughput against the raw embedding throughput of the configured embedder on the same
texts, for a retrieval-only ingest (``ingest: {prepare: none}``: the chunks alone) and the default
(``prepare: auto`` with the offline models: also the texts the re-scorer and the answerer embed).

Usage: .venv/bin/python benchmarks/ingest.py [D] [ROUNDS]

Ingests the first D documents (default 200) of the bundled HotpotQA corpus into a fresh workspace
with the lab's defaults (chunking, FAISS + BM25 indexes, SQLite store, the vector cache, and the
texts the re-scorer and the answerer will embed), recording every batch of texts handed to the
embedder. Then embeds exactly those batches again with the same embedder, alone; ROUNDS times
(default 2), taking turns, best of each. Prints

``ingest: X texts/s vs raw embedding Y texts/s on the same texts (ingest/raw time R×)``

with the goal R ≤ 1.5 (a warm-up ingest of three other documents into another KB first takes the
first use of jieba, bm25s and FAISS out of the measure; what ingest adds to the embedding itself: chunking, the passages and
sentences built, the store, the indexes, the vector cache's writes).
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

import numpy as np


class Recorder:
    """The embedder, with the batches it was asked for kept."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.model_key, self.dimension = inner, inner.model_key, inner.dimension
        self.batches: list[list[str]] = []

    def embed(self, texts: Any) -> np.ndarray:
        self.batches.append(list(texts))
        return self.inner.embed(texts)


def ingest_once(docs: list[dict[str, str]], warmup: list[dict[str, str]], prepare: str) -> tuple[float, Any, Recorder]:
    from rag_lab.lab.lab import Lab

    with tempfile.TemporaryDirectory() as ws:
        lab = Lab.from_config({"ingest": {"prepare": prepare}}, workspace=ws)
        cached = lab.embedder.inner
        rec = Recorder(cached.embedder)
        cached.embedder = rec
        # first use of the tokenizers, jieba, bm25s and FAISS (imports, dictionaries): not ingest's throughput
        lab.ingest_documents(warmup, kb="warmup", progress=False)
        rec.batches.clear()
        t0 = time.perf_counter()
        report = lab.ingest_documents(docs, kb="bench", progress=False)
        seconds = time.perf_counter() - t0
        lab.workspace.close()
    return seconds, report, rec


def main() -> None:
    n_docs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    from rag_lab.eval.datasets import load_dataset

    ds = load_dataset("hotpotqa_hipporag100")
    as_docs = [{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus]
    docs, warmup = as_docs[:n_docs], as_docs[-3:]
    per_mode: dict[str, float] = {}
    for mode, label in (("none", "retrieval-only"), ("auto", "default")):
        ingest_s, raw_s = [], []
        for _ in range(rounds):  # taking turns: the machine's speed drifts
            seconds, report, rec = ingest_once(docs, warmup, mode)
            ingest_s.append(seconds)
            t0 = time.perf_counter()
            for b in rec.batches:
                rec.inner.embed(b)
            raw_s.append(time.perf_counter() - t0)
        texts = [t for b in rec.batches for t in b]
        chars = sum(len(t) for t in texts) / max(1, len(texts))
        best_i, best_r = min(ingest_s), min(raw_s)
        per_mode[label] = len(docs) / best_i
        print(
            f"ingest ({label}): {len(docs)} documents, {report.chunks_added} chunks, {len(texts)} texts embedded "
            f"({report.vectors_added} chunk vectors + {report.texts_prepared} rerank/answer texts, {chars:.0f} "
            f"chars on average); best of {rounds}: {best_i:.1f} s; ingest {', '.join(f'{s:.1f}' for s in ingest_s)} "
            f"s, raw {', '.join(f'{s:.1f}' for s in raw_s)} s"
        )
        print(
            f"ingest ({label}): {len(texts) / best_i:.1f} texts/s vs raw embedding {len(texts) / best_r:.1f} texts/s "
            f"on the same texts (ingest/raw time {best_i / best_r:.2f}×)"
        )
    print(
        f"ingest: retrieval-only {per_mode['retrieval-only']:.1f} documents/s vs default {per_mode['default']:.1f} "
        f"documents/s ({per_mode['retrieval-only'] / per_mode['default']:.1f}× faster)"
    )


if __name__ == "__main__":
    main()
