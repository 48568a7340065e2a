"""The 8-bit scalar-quantised copy of a vector index (:class:`_Quantized`) and the query path over
it (:class:`QuantizedSearch`): scan the copy, re-score its best candidates exactly, and widen
until a bound on the quantisation error proves the results are the flat scan's, bit for bit.
The copy may be split in parts scanned in parallel threads. :class:`QuantizedSearch` is one of
the parts of :class:`~rag_lab.retrieval.vector_index.VectorIndex`.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.retrieval.faiss_threads import _faiss, _single_query_threads
from rag_lab.retrieval.vector_base import VectorIndexBase

if TYPE_CHECKING:
    import faiss


class QuantizedSearch(VectorIndexBase):
    """The 8-bit path of unrestricted queries, and what it learns of recent queries."""

    def scans_in_parallel(self) -> bool:
        """Whether unrestricted queries scan the 8-bit copy in two or more parts (threads) now."""
        n = len(self)
        return self._policy.kind_for(n) == "sq8" and self._policy.shards_for(n) > 1

    def _ready_quantized(self) -> _Quantized | None:
        """The 8-bit copy when the policy wants it now (built on first use), else None. Call
        under the lock."""
        if self._policy.kind_for(len(self)) != "sq8":
            return None  # kept until the data changes: switching policies back and forth is free
        n = len(self)
        if self._quantized is None or len(self._quantized.parts) != self._policy.shards_for(n):
            self._quantized = _Quantized.build(_faiss(), self._index, self.dimension, shards=self._policy.shards_for(n))
        return self._quantized

    def _search_quantized(
        self, faiss: ModuleType, qz: _Quantized, q: np.ndarray, top_k: int, n: int, threshold: float = -np.inf
    ) -> list[tuple[int, float]]:
        """The flat scan's results (``top_k`` best, then ``score >= threshold``) from the 8-bit
        scan plus exact re-scoring.

        Every vector's exact score is within ``bound`` of ``K + alpha · A`` (see :class:`_Quantized`),
        so a candidate's exact score is at most its upper bound ``U = K + alpha · A + bound`` and at
        least ``U - 2 · bound``. The scan returns the ``c`` best candidates by ``A``; a vector
        outside them has ``A <=`` the last candidate's, so its score is at most ``U_last``. Nothing
        outside can enter (or tie into) the results when ``U_last`` is below the threshold, or
        below the ``top_k``-th best exact score among the candidates. Only candidates that may
        reach both the threshold and the ``top_k``-th candidate's lower bound are re-scored (the
        others are out either way). When the check fails, ``c`` grows (×4) until it holds, or the
        flat scan answers.

        The first ``c`` follows the index' recent queries (:meth:`_first_candidates`): the number
        of candidates the check needed, so a threshold that cuts most vectors, or well separated
        scores, scan for fewer. The results never depend on it."""
        if n == 0:
            return []
        c = min(n, self._first_candidates(top_k))
        stats = self.quantized_stats
        stats["queries"] += 1
        while True:
            approx, pos, const, alpha, bound = qz.scan(q, c)
            m = int(np.count_nonzero(pos >= 0))  # found, best first; -1 pads the end
            if m == 0:
                return []
            upper = const + alpha * approx[:m].astype(np.float64) + bound  # non-increasing
            floor = threshold
            if m >= top_k:  # the top_k-th candidate's exact score is at least its lower bound
                floor = max(floor, float(upper[top_k - 1]) - 2.0 * bound)
            r = int(np.searchsorted(-upper, -floor, side="right"))  # candidates with upper >= floor
            kth = -np.inf
            if r:
                found = pos[:r]
                exact = qz.exact_scores(faiss, q, found)
                order = np.lexsort((found, -exact))
                kth = float(exact[order[min(top_k, r) - 1]])
            outside = float(upper[m - 1])  # a vector outside the candidates scores at most this
            if m < c or c >= n or outside < threshold or (r >= top_k and kth > outside):
                self._note_candidates(top_k, int(np.searchsorted(-upper, -max(threshold, kth), side="right")) + 1)
                if not r:
                    return []
                keep = order[exact[order] >= kth]  # the top_k and whatever ties the k-th
                return list(zip(qz.fids[found[keep]].tolist(), exact[keep].tolist()))
            if c * 4 >= n:
                stats["flat_fallbacks"] += 1
                self._note_candidates(top_k, n)
                return self._search_flat(faiss, q, top_k, n, None)
            stats["rescans"] += 1
            c *= 4

    def _first_candidates(self, top_k: int) -> int:
        """Candidates of a query's first 8-bit scan: ``quantized_candidates`` per result (at least
        64 more) until 8 queries are known; then 1.25 × the 90th percentile of what the check
        needed per result in the recent queries, at most that, at least 64 more than ``top_k``
        (a smaller scan is cheaper: faiss keeps a heap of ``c``)."""
        cap = top_k * self._policy.quantized_candidates
        seen = self._needed
        if len(seen) >= 8:  # sorted in Python: np.quantile's call overhead exceeds the sort of 32 floats
            p90 = sorted(seen)[(len(seen) * 9) // 10]
            cap = min(cap, math.ceil(top_k * 1.25 * p90))
        return max(cap, top_k + 64)

    def _note_candidates(self, top_k: int, needed: int) -> None:
        """Remember that a query for ``top_k`` needed ``needed`` candidates (call under the lock)."""
        self._needed.append(needed / top_k)


class _Quantized:
    """An 8-bit scalar-quantised copy of the flat index, the exact vectors it re-scores against (a
    read-only view of the flat index' storage, valid until the next change, which drops this
    copy) and each position's faiss id.

    Each dimension d is mapped to 256 levels over its own range: ``x_d ≈ low_d + step_d · c_d``
    with ``c_d`` in 0..255 and ``step_d = (high_d - low_d) / 255`` (ranges from every vector, so
    none is clipped). The codes are stored centred (``c_d - 128``) in a faiss
    ``QT_8bit_direct_signed`` index, whose kernel takes an integer query and sums integer
    products, exactly. The query is scanned as integers too: ``q'_d = q_d · step_d`` rounded to
    ``qs_d = round(q'_d / alpha)`` with ``alpha = max|q'| / 127``. Then, for every vector,

        q · x = K + alpha · A + R,   K = q · low + 128 · Σ q'_d,   A = Σ qs_d (c_d - 128),

    with ``|R|`` bounded by :meth:`bound` from the codes' rounding (half a step per dimension, or
    by Cauchy-Schwarz ``|q| · max_i |x_i - x̂_i|``, whichever is less) and the query's (``alpha``
    times the smaller of half the codes' largest L1 norm and ``|ε| · max_i |c_i - 128|`` for the
    query's own rounding errors ``ε``). faiss' integer kernel is ~2.5× faster than its float 8-bit
    decoder (``QT_8bit``): one scan at 100k x 384 took 1.70 vs 4.19 ms p50 (flat: 5.29 ms) in a run
    of ``benchmarks/search.py``.

    The codes may be split in contiguous parts (``shards``), scanned in parallel threads and
    merged: the merged list is the ``c`` best by ``A`` over all parts, so the exactness argument
    of :meth:`VectorIndex._search_quantized` is unchanged (a vector outside has ``A`` at most the
    last candidate's)."""

    __slots__ = ("parts", "offsets", "vectors", "fids", "step", "low", "code_l1", "code_l2", "resid_l2")

    def __init__(
        self,
        parts: list[faiss.IndexScalarQuantizer],
        vectors: np.ndarray,
        fids: np.ndarray,
        step: np.ndarray,
        low: np.ndarray,
        norms: tuple[float, float, float],
    ) -> None:
        self.parts, self.vectors, self.fids, self.step, self.low = parts, vectors, fids, step, low
        #: position of each part's first vector
        self.offsets = np.cumsum([0] + [int(p.ntotal) for p in parts[:-1]]).astype(np.int64)
        #: max over vectors of Σ_d |c_d - 128|, of |c - 128| and of |x - x̂| (Euclidean)
        self.code_l1, self.code_l2, self.resid_l2 = norms

    def scan(self, q: np.ndarray, c: int, parallel: bool = True) -> tuple[np.ndarray, np.ndarray, float, float, float]:
        """The ``c`` best positions by ``A``: (A, positions, K, alpha, bound); positions ``-1``
        pad the list when there are fewer than ``c`` vectors. ``parallel=False`` scans the parts
        one after the other in the calling thread (the same result; for benchmarks)."""
        q64 = q[0].astype(np.float64)
        scaled = q64 * self.step
        top = float(np.abs(scaled).max()) if scaled.size else 0.0
        alpha = top / 127.0 if top > 0 else 1.0
        qs = np.rint(scaled / alpha)  # integers in [-127, 127]: the kernel truncates, these are exact
        qs32 = np.ascontiguousarray(qs[None, :], dtype=np.float32)
        k = float(q64 @ self.low) + 128.0 * float(scaled.sum())
        bound = self.bound(q64, alpha, scaled / alpha - qs)
        if len(self.parts) == 1:
            approx, pos = self.parts[0].search(qs32, c)
            return approx[0], pos[0], k, alpha, bound
        if parallel:
            pool = _scan_pool()
            pending = [pool.submit(_scan_part, part, qs32, c) for part in self.parts[1:]]
            first, first_pos = self.parts[0].search(qs32, c)  # the caller's thread scans the first part
            got = [(first[0], first_pos[0])] + [f.result() for f in pending]
        else:
            got = [(a[0], p[0]) for a, p in (part.search(qs32, c) for part in self.parts)]
        approx = np.concatenate([a for a, _ in got])
        pos = np.concatenate([np.where(p >= 0, p + off, -1) for (_, p), off in zip(got, self.offsets)])
        valid = pos >= 0
        approx, pos = approx[valid], pos[valid]
        best = np.argsort(-approx, kind="stable")[:c]
        approx, pos = approx[best], pos[best]
        if pos.size < c:
            approx = np.concatenate([approx, np.full(c - pos.size, -np.inf, dtype=approx.dtype)])
            pos = np.concatenate([pos, np.full(c - pos.size, -1, dtype=pos.dtype)])
        return approx, pos, k, alpha, bound

    def bound(self, q64: np.ndarray, alpha: float, eps: np.ndarray) -> float:
        """``max |q · x - (K + alpha · A)|`` over the vectors, float rounding included. Codes: half
        a step per dimension (a thousandth more: levels are rounded in float32) or ``|q|`` times
        the largest residual. Query: ``alpha`` times half the codes' largest L1 norm or
        ``|ε| · max |c - 128|``. Plus 1e-4 for float sums (the flat kernel's float32 sum over a
        few thousand dimensions of unit vectors errs by ~1e-5)."""
        absq = np.abs(q64)
        qnorm = float(np.sqrt(q64 @ q64))
        codes = min(0.5 * (1.0 + 1e-3) * float(absq @ self.step), qnorm * self.resid_l2 * (1.0 + 1e-6))
        query = alpha * min(0.5 * self.code_l1, float(np.sqrt(eps @ eps)) * self.code_l2 * (1.0 + 1e-6))
        # should the kernel sum in float32, integers past 2^24 round: 127 · code_l1 bounds |A|
        kernel = alpha * 127.0 * self.code_l1 * absq.size * 2.0**-24
        return float(codes + query + kernel + 1e-4 * (1.0 + float(absq.sum())))

    def exact_scores(self, faiss: ModuleType, q: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Inner products of ``q`` with the vectors at ``positions``, by faiss' own kernel: bit
        for bit the flat scan's scores (numpy's BLAS sums in another order, and a last-bit
        difference reorders ties)."""
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        out = np.empty(pos.size, dtype=np.float32)
        qv = np.ascontiguousarray(q[0], dtype=np.float32)
        faiss.fvec_inner_products_by_idx(
            faiss.swig_ptr(out),
            faiss.swig_ptr(qv),
            faiss.swig_ptr(self.vectors),
            faiss.swig_ptr(pos),
            self.vectors.shape[1],
            1,
            pos.size,
        )
        return out

    @classmethod
    def build(
        cls, faiss: ModuleType, id_map: faiss.IndexIDMap, dimension: int, block: int = 16_384, shards: int = 1
    ) -> _Quantized:
        n = int(id_map.ntotal)
        flat = faiss.downcast_index(id_map.index)
        vectors = faiss.rev_swig_ptr(flat.get_xb(), n * dimension).reshape(n, dimension)
        vectors.flags.writeable = False
        fids = faiss.vector_to_array(id_map.id_map).astype(np.int64)
        low = vectors.min(axis=0).astype(np.float64)
        step = (vectors.max(axis=0).astype(np.float64) - low) / 255.0
        # codes in float32 (4x faster than float64 at 100k): a level is off the exact rounding only
        # within ~5e-5 of a half level, which :meth:`bound` allows for
        low32 = low.astype(np.float32)  # exact: a minimum of float32 values
        inv32 = np.divide(1.0, step, out=np.zeros_like(step), where=step > 0).astype(np.float32)
        step32 = step.astype(np.float32)
        shards = max(1, min(shards, n))
        bounds = [n * i // shards for i in range(shards + 1)]
        parts = [
            faiss.IndexScalarQuantizer(
                dimension, faiss.ScalarQuantizer.QT_8bit_direct_signed, faiss.METRIC_INNER_PRODUCT
            )
            for _ in range(shards)
        ]
        l1 = l2 = resid = 0.0
        # a block at a time (the float copies are transient), no block across two parts
        cuts = sorted({*range(0, n, block), *bounds[1:-1]})
        for start, stop in zip(cuts, [*cuts[1:], n]):
            part = vectors[start:stop]
            codes = np.subtract(part, low32)
            codes *= inv32
            np.rint(codes, out=codes)
            np.clip(codes, 0.0, 255.0, out=codes)
            diff = np.subtract(part, step32 * codes + low32)  # x - x̂ in float32 (see slack below)
            resid = max(resid, float(np.sqrt(np.einsum("ij,ij->i", diff, diff)).max()))
            codes -= 128.0
            l1 = max(l1, float(np.abs(codes).sum(axis=1, dtype=np.float64).max()))
            l2 = max(l2, float(np.sqrt(np.einsum("ij,ij->i", codes, codes, dtype=np.float64)).max()))
            parts[np.searchsorted(bounds, start, side="right") - 1].add(codes)
        # float32 decoding and subtraction err by a few ulps of the largest coordinate per dimension
        resid += np.sqrt(dimension) * 2.0**-20 * float(np.abs(vectors).max(initial=0.0))
        return cls(parts, vectors, fids, step, low, (l1, l2, resid))


_pool_lock = threading.Lock()


_pool: tuple[int, ThreadPoolExecutor] | None = None


def _scan_pool() -> ThreadPoolExecutor:
    """Worker threads for the 8-bit copy's parts (created on first use, shared by every index;
    a forked child, which has none of its parent's threads, gets its own)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=3, thread_name_prefix="rag-lab-sq8"))
        return _pool[1]


def _scan_part(part: faiss.IndexScalarQuantizer, qs32: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """One part's ``c`` best by the integer kernel, on one OpenMP thread."""
    _single_query_threads(_faiss(), 1)
    approx, pos = part.search(qs32, c)
    return approx[0], pos[0]
