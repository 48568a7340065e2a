"""The post-retrieval formulas as numpy over candidate arrays (spec §4.6.1, §4.6.2, §4.6.5, §4.6.6,
§4.9, §6.8).

The pure functions of :mod:`rag_lab.reranking` and the rerank / top-K stages stay the reference;
these give the same picks and orders, ties included (property tests check it), in a handful of
vector operations, which is what lets the live stages stay within a couple of milliseconds and
the tuning evaluator run thousands of configs per second:

* :func:`threshold_ladder`: ``filter_by_threshold`` and its ×factor retry, on the model's output
  arrays (indices and scores in the model's order);
* :func:`composite_scores`, :func:`faq_boost`, :func:`boost_and_sort`: the composite score, the FAQ
  boost and the wiki / memory-affinity boosts with their stable re-sort;
* :func:`select_mmr_overlap`: greedy MMR from a precomputed intersection-count matrix (Jaccard =
  ``|a∩b| / (|a|+|b|-|a∩b|)``), one pick = one vector update; :func:`select_mmr_jaccard` from the
  Jaccard matrix itself (what the tuning evaluator captures); :func:`select_mmr_ids` from token-id
  arrays without building the matrix (one row per pick, the live stage; :func:`select_mmr_ids_deferred`
  with the trace built on first read);
* :func:`top_k_order`: FILTER_TOP_K's deterministic sort and truncation.

Scores must be finite (callers fall back to the reference functions otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_lab.reranking.mmr import MMRCandidate, MMRStep
from rag_lab.searchutil.tokens import intersection_row_counter

__all__ = [
    "LadderOutcome",
    "boost_and_sort",
    "composite_scores",
    "faq_boost",
    "select_mmr_ids",
    "select_mmr_ids_deferred",
    "select_mmr_jaccard",
    "select_mmr_overlap",
    "stable_desc_order",
    "threshold_ladder",
    "tiebreak_ranks",
    "top_k_order",
]


# --------------------------------------------------------------------------- threshold ladder


@dataclass(frozen=True, slots=True)
class LadderOutcome:
    """Kept positions (into the model's output, in its order), the outcome label and the
    threshold that produced them (the degraded one after a retry)."""

    positions: np.ndarray
    outcome: str
    threshold_used: float


def _filter(
    index: np.ndarray, score: np.ndarray, n: int, threshold: float, fallback_min: float
) -> tuple[np.ndarray, str]:
    valid = (index >= 0) & (index < n)
    passing = np.flatnonzero(valid & (score >= threshold))
    if passing.size:
        return passing, "ok"
    if valid.any():
        masked = np.where(valid, score, -np.inf)
        best = int(np.argmax(masked))  # first maximum, as max() in the reference
        if score[best] >= fallback_min:
            return np.array([best], dtype=np.intp), "fallback_top1"
    return np.empty(0, dtype=np.intp), "all_below_threshold"


def threshold_ladder(
    index: np.ndarray,
    score: np.ndarray,
    n: int,
    threshold: float,
    fallback_min: float,
    degraded: float | None,
) -> LadderOutcome:
    """The rerank stage's threshold ladder on the model output (``index[j]``, ``score[j]`` in the
    model's order): items >= ``threshold``; else the best alone if >= ``fallback_min``; when that
    keeps nothing and ``degraded`` is given (``rerank.degraded_threshold``), the same at the
    degraded threshold, outcome ``threshold_degraded`` when it keeps something."""
    kept, outcome = _filter(index, score, n, threshold, fallback_min)
    used = threshold
    if not kept.size and degraded is not None:
        used = degraded
        kept, outcome = _filter(index, score, n, degraded, fallback_min)
        if kept.size:
            outcome = "threshold_degraded"
    return LadderOutcome(kept, outcome, used)


# --------------------------------------------------------------------------- scores


def composite_scores(
    model: np.ndarray,
    base: np.ndarray,
    source_weight: np.ndarray,
    w_model: float,
    w_base: float,
    w_source: float,
) -> np.ndarray:
    """``clip(w_model*model + w_base*base + w_source*source_weight, 0, 1)``, left to right in
    doubles as :func:`rag_lab.reranking.composite.composite_score`."""
    s = w_model * np.asarray(model, dtype=np.float64) + w_base * np.asarray(base, dtype=np.float64)
    s = s + w_source * np.asarray(source_weight, dtype=np.float64)
    return np.minimum(np.maximum(s, 0.0), 1.0)


def faq_boost(scores: np.ndarray, is_faq: np.ndarray, enabled: bool, boost: float) -> np.ndarray:
    """Scores of FAQ items × ``boost`` when FAQ priority is on and ``boost > 1`` (not capped)."""
    if not enabled or boost <= 1.0 or not is_faq.any():
        return scores
    return np.where(is_faq, scores * boost, scores)


def stable_desc_order(scores: np.ndarray) -> np.ndarray:
    """Positions by descending score, equal scores in their current order (``sort(key=-score)``)."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def boost_and_sort(scores: np.ndarray, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A boost stage (wiki pages ×1.3, memory affinity): ``(scores × factors, order)`` where
    ``order`` re-sorts stably by the new scores; nothing moves when no factor exceeds 1."""
    if not (factors > 1.0).any():
        return scores, np.arange(scores.size)
    boosted = np.where(factors > 1.0, scores * factors, scores)
    order = stable_desc_order(boosted)
    return boosted[order], order


# --------------------------------------------------------------------------- MMR


def _mmr_core(
    scores: np.ndarray,
    k: int,
    lam: float,
    similarity: Callable[[int], np.ndarray] | None,
    trace_width: int | None,
) -> tuple[list[int], list[MMRStep]]:
    """Greedy MMR; ``similarity(c)`` is the Jaccard of every candidate with pick ``c``."""
    n = scores.size
    if k <= 0 or n == 0:
        return [], []
    k = min(k, n)
    rel = lam * scores  # a pick's relevance becomes -inf: it is never picked again
    w = 1.0 - lam
    red = np.zeros(n, dtype=np.float64)
    values = np.empty(n, dtype=np.float64)  # rewritten each step (the trace may overwrite it)
    penalty = np.empty(n, dtype=np.float64)
    selected: list[int] = []
    steps: list[MMRStep] = []
    for step in range(k):
        np.subtract(rel, np.multiply(red, w, out=penalty), out=values)  # rel - w * red
        c = int(values.argmax())  # first maximum: the earliest index on ties
        selected.append(c)
        if trace_width is not None:
            steps.append(_trace_step(step, c, scores, red, lam, values, trace_width))
        rel[c] = -np.inf
        if step == k - 1:
            break
        assert similarity is not None
        np.maximum(red, similarity(c), out=red)
    return selected, steps


def _jaccard_rows(row_counts: Callable[[int], np.ndarray], sizes: np.ndarray) -> Callable[[int], np.ndarray]:
    """Jaccard rows ``|a∩b| / (|a|+|b|-|a∩b|)`` from intersection-count rows (0 for two empty sets)."""
    size_f = sizes.astype(np.float64)
    all_nonempty = bool(size_f.all())
    n = size_f.size
    union = np.empty(n, dtype=np.float64)  # the returned row: valid until the next call

    def row(c: int) -> np.ndarray:
        common = row_counts(c)
        np.subtract(size_f[c], common, out=union)
        np.add(size_f, union, out=union)  # size_f + (size_f[c] - common)
        if all_nonempty:  # |a ∪ b| >= |b| > 0
            np.divide(common, union, out=union)
            return union
        out = np.zeros(n, dtype=np.float64)
        np.divide(common, union, out=out, where=union > 0)
        return out

    return row


def _trace_step(
    step: int, c: int, scores: np.ndarray, red: np.ndarray, lam: float, values: np.ndarray, width: int
) -> MMRStep:
    runner: list[MMRCandidate] = []
    v = values  # recomputed each step, free to overwrite; earlier picks are -inf already
    v[c] = -np.inf
    for _ in range(width):  # argmax gives the first maximum: (value desc, index) order
        j = int(v.argmax())
        if v[j] == -np.inf:
            break
        runner.append(MMRCandidate(j, float(scores[j]), float(red[j]), float(v[j])))
        v[j] = -np.inf
    return MMRStep(
        step=step,
        index=c,
        relevance=float(scores[c]),
        redundancy=float(red[c]),
        mmr=float(lam * scores[c] - (1.0 - lam) * red[c]),
        runner_ups=runner,
    )


def select_mmr_overlap(
    scores: np.ndarray,
    counts: np.ndarray,
    sizes: np.ndarray,
    k: int,
    lam: float,
    trace_width: int | None = None,
) -> tuple[list[int], list[MMRStep]]:
    """Greedy MMR (same picks as :func:`rag_lab.reranking.mmr.select_mmr`, earliest index on ties)
    from ``counts`` (:func:`rag_lab.searchutil.tokens.intersection_counts`) and the token-set ``sizes``. Returns the picks and,
    with ``trace_width``, the steps as :func:`~rag_lab.reranking.mmr.mmr_trace` gives them."""
    s = np.asarray(scores, dtype=np.float64)
    rows = np.asarray(counts, dtype=np.float64)
    return _mmr_core(s, k, lam, _jaccard_rows(rows.__getitem__, np.asarray(sizes)), trace_width)


def select_mmr_jaccard(
    scores: np.ndarray, jaccard: np.ndarray, k: int, lam: float, trace_width: int | None = None
) -> tuple[list[int], list[MMRStep]]:
    """:func:`select_mmr_overlap` from a precomputed Jaccard matrix (``jaccard[i, j]`` as MMR
    computes it from the counts): one pick is one ``maximum`` over a matrix row."""
    s = np.asarray(scores, dtype=np.float64)
    return _mmr_core(s, k, lam, np.asarray(jaccard, dtype=np.float64).__getitem__, trace_width)


def select_mmr_ids(
    scores: np.ndarray,
    ids: Sequence[np.ndarray],
    k: int,
    lam: float,
    trace_width: int | None = None,
) -> tuple[list[int], list[MMRStep]]:
    """:func:`select_mmr_overlap` from token-id arrays, computing one row of intersection counts
    per pick (a gather over the candidates' shared tokens) instead of the whole matrix."""
    s = np.asarray(scores, dtype=np.float64)
    n = s.size
    sizes = np.array([a.size for a in ids], dtype=np.intp)
    if n != sizes.size:
        raise ValueError(f"select_mmr_ids: {sizes.size} token arrays for {n} scores")
    if k <= 1 or n <= 1:
        return _mmr_core(s, k, lam, None, trace_width)
    return _mmr_core(s, k, lam, _jaccard_rows(intersection_row_counter(ids), sizes), trace_width)


def select_mmr_ids_deferred(
    scores: np.ndarray, ids: Sequence[np.ndarray], k: int, lam: float, trace_width: int
) -> tuple[list[int], Callable[[], list[MMRStep]]]:
    """The picks of :func:`select_mmr_ids` at once, and a function giving its trace of
    ``trace_width`` runner-ups (computed on the first call by running it again with the trace,
    on the same arrays; later calls return the same list). The live rerank stage defers its
    trace this way: most runs never read it, and the picks cost less without it."""
    s = np.array(scores, dtype=np.float64)  # a copy: the trace reads it later
    ids = list(ids)
    picks, _ = select_mmr_ids(s, ids, k, lam)
    built: list[list[MMRStep]] = []

    def trace() -> list[MMRStep]:
        if not built:
            traced, steps = select_mmr_ids(s, ids, k, lam, trace_width)
            assert traced == picks, "MMR picks changed between two runs on the same arrays"
            built.append(steps)
        return built[0]

    return picks, trace


# --------------------------------------------------------------------------- FILTER_TOP_K


def tiebreak_ranks(results: Sequence[Any]) -> np.ndarray:
    """Dense rank of ``(knowledge_id, chunk_type, chunk_index, id)`` (bytes order), the tie-break
    of FILTER_TOP_K's deterministic sort; equal keys share a rank."""
    keys = [
        (r.knowledge_id.encode("utf-8"), r.chunk_type.encode("utf-8"), r.chunk_index, r.id.encode("utf-8"))
        for r in results
    ]
    ranks = np.empty(len(keys), dtype=np.intp)
    prev: Any = None
    rank = -1
    for pos in sorted(range(len(keys)), key=keys.__getitem__):
        if keys[pos] != prev:
            rank += 1
            prev = keys[pos]
        ranks[pos] = rank
    return ranks


def top_k_order(scores: np.ndarray, ranks: np.ndarray, k: int) -> np.ndarray:
    """Positions by (score desc, tie-break rank, position), the first ``k`` when ``k > 0``."""
    order = np.lexsort((ranks, -np.asarray(scores, dtype=np.float64)))
    return order[:k] if k > 0 else order
