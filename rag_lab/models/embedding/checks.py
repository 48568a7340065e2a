"""What every embedder shares: the checks of its ``texts`` argument, L2 normalisation, the row-wise
dot product whose value does not depend on the batch, onnxruntime's thread count."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import cast

import numpy as np

from rag_lab.models.base import ModelError


def check_str_sequence(values: Sequence[str], where: str, name: str) -> list[str]:
    """A list of str from a sequence argument (a bare str is refused, not split into characters)."""
    if isinstance(values, (str, bytes)):
        raise ModelError(f"{where} takes a sequence of strings as {name}, got a single {type(values).__name__}")
    out = list(values)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ModelError(f"{where}: {name}[{i}] is {type(t).__name__}, expected str")
    return out


def check_texts(texts: Sequence[str], who: str) -> list[str]:
    """Validate an ``embed()`` argument."""
    return check_str_sequence(texts, f"{who}.embed()", "texts")


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (an all-zero row stays zero), as float32."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return cast(np.ndarray, (v / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False))


def row_dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` (float32) whose value for a row depends only on that row and
    ``vector``: numpy's own ``einsum`` loop, which sums every row in the same order whatever the
    row count, the row's position or the arrays' alignment (checked in
    ``tests/models/test_determinism.py``).

    A BLAS ``matrix @ vector`` (OpenBLAS ``sgemv``) blocks the rows, and a row's rounding depends
    on how many rows the matrix has and where the row sits: the same passage's cosine with the
    same query differed by 1.2e-7 (0.76097113 / 0.76097125) when scored among 3 or 4 others. The
    ONNX vectors themselves are identical bit for bit whatever batch they are embedded in
    (``tests/models/test_determinism.py``). Cost (``benchmarks/determinism.py``): 2,000 rows of
    384 in ~90 µs against ~20 µs for the BLAS product, the answerer's largest candidate set.
    """
    m = np.asarray(matrix, dtype=np.float32)
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    if m.ndim != 2 or m.shape[1] != v.shape[0]:
        raise ValueError(f"row_dots: matrix of shape {m.shape} and vector of length {v.shape[0]} do not match")
    out: np.ndarray = np.einsum("ij,j->i", m, v)
    return out


def default_thread_count() -> int:
    """onnxruntime intra-op threads: every core, at most 4 (measured: 2 threads embed ~1.7x faster
    than 1 on a 2-core machine; see benchmarks/embedding_throughput.py)."""
    return max(1, min(4, os.cpu_count() or 1))


def short_text(text: str, limit: int = 300) -> str:
    """Whitespace-collapsed text cut to ``limit`` characters (for error messages)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
