"""Throughput of the offline MiniLM int8 ONNX embedder by batch size and thread count.

Usage: .venv/bin/python benchmarks/embedding_throughput.py [N_TEXTS]

Embeds the same HotpotQA passages and sentences with each setting, in one process, and prints
texts per second and the ratio to batch 1 / 1 thread.
"""

from __future__ import annotations

import sys
import time

from rag_lab.eval.datasets import load_dataset
from rag_lab.models.embedding import OnnxMiniLMEmbedder


def rate(e: OnnxMiniLMEmbedder, texts: list[str]) -> float:
    e.embed(texts[:2])  # warm up
    t = time.perf_counter()
    e.embed(texts)
    return len(texts) / (time.perf_counter() - t)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    ds = load_dataset("hotpotqa_hipporag100")
    passages = [d.text for d in ds.corpus][:n]
    sentences = [s for d in ds.corpus for s in d.text.split(". ") if s][:n]
    base = None
    print(f"{'batch':>5} {'threads':>7} {'passages/s':>11} {'sentences/s':>12} {'ratio':>6}")
    for threads in (1, 2):
        for batch in (1, 4, 32):
            e = OnnxMiniLMEmbedder(batch_size=batch, intra_op_num_threads=threads)
            p, s = rate(e, passages), rate(e, sentences)
            base = base or p
            print(f"{batch:>5} {threads:>7} {p:>11.1f} {s:>12.1f} {p / base:>6.2f}")


if __name__ == "__main__":
    main()
