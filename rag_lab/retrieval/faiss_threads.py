"""faiss, imported on first use, and its OpenMP threads: one per query in the calling thread
(:func:`_single_query_threads`), every core while a graph is built (:class:`_all_threads`).
"""

from __future__ import annotations

import os
import threading
from types import ModuleType

_tls = threading.local()


def _faiss() -> ModuleType:
    import faiss  # lazy: heavy import

    return faiss


def _single_query_threads(faiss: ModuleType, n: int) -> None:
    """Use ``n`` OpenMP threads for searches made from the calling thread. One query over a flat
    index is several times faster on one thread than with OpenMP's fork/join (measured: 6 ms vs
    47 ms at 100k x 384 on 2 cores). The OpenMP setting is per thread, so other faiss users in the
    process keep theirs."""
    if getattr(_tls, "omp_threads", None) != n:
        faiss.omp_set_num_threads(n)
        _tls.omp_threads = n


class _all_threads:
    """Context manager: let faiss use every core in the calling thread (graph builds), then
    make the next query re-apply its single-query thread setting."""

    def __init__(self, faiss: ModuleType) -> None:
        self.faiss = faiss

    def __enter__(self) -> None:
        self.faiss.omp_set_num_threads(os.cpu_count() or 1)
        _tls.omp_threads = None

    def __exit__(self, *exc: object) -> None:
        _tls.omp_threads = None
