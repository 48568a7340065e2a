"""What load-independent, batch-independent scores cost (issue 23).

Usage: .venv/bin/python benchmarks/determinism.py [N_ROWS]

1. The cosines of the re-scorer and the extractive answerer: BLAS ``M @ q`` (whose per-row
   rounding depends on the row count) against :func:`rag_lab.models.embedding.row_dots`
   (numpy's einsum loop, one summation order for every row), at the answerer's largest candidate count and at a
   rerank's.
2. Whether the ONNX MiniLM vectors depend on the batch they are embedded in (batch 1 against
   batch 16 with padding), and what each batch size costs.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from rag_lab.models.embedding import OnnxMiniLMEmbedder, row_dots


def best(fn, repeat: int = 50) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rng = np.random.default_rng(0)
    print(f"{'rows':>5} {'matmul us':>10} {'row_dots us':>12} {'rows whose matmul value depends on the row count':>50}")
    for rows in (30, n):
        m = rng.standard_normal((rows, 384)).astype(np.float32)
        q = rng.standard_normal(384).astype(np.float32)
        full = m @ q
        unstable = sum(not np.array_equal(m[:k] @ q, full[:k]) for k in range(1, rows, max(1, rows // 100)))
        print(
            f"{rows:>5} {best(lambda m=m, q=q: m @ q):>10.1f} {best(lambda m=m, q=q: row_dots(m, q)):>12.1f} {unstable:>50}"
        )

    texts = [f"Sentence {i} about the lighthouse keeper and the harbour. " * (1 + i % 9) for i in range(64)]
    one, sixteen = OnnxMiniLMEmbedder(batch_size=1), OnnxMiniLMEmbedder(batch_size=16)
    one.embed(texts[:2]), sixteen.embed(texts[:2])
    t = time.perf_counter()
    a = one.embed(texts)
    t1 = time.perf_counter() - t
    t = time.perf_counter()
    b = sixteen.embed(texts)
    t16 = time.perf_counter() - t
    print(f"ONNX batch 1: {len(texts) / t1:.1f} texts/s, batch 16: {len(texts) / t16:.1f} texts/s")
    print(f"vectors identical bit for bit across batch sizes: {np.array_equal(a, b)}")


if __name__ == "__main__":
    main()
