"""Maximal Marginal Relevance selection (spec §6.8, seed ``SelectMMR``, Appendix A.1).

``mmr(i) = λ·score(i) − (1−λ)·max_{s ∈ selected} jaccard(tokens(i), tokens(s))``; at each step
the candidate with the greatest value wins, the earliest index on ties (the running best
starts at −∞, so ``min(k, n)`` items are always selected; a NaN score counts as −∞). With
``k == 1`` only the relevance term matters and nothing is tokenised.

One greedy loop (:func:`_greedy`) serves every caller; they differ only in where a pick's row of
Jaccard similarities comes from:

* :func:`select_mmr`, :func:`mmr_trace`, :func:`apply_mmr`: token sets (``tokenize_simple`` of
  the enriched passage by default), numbered and counted like token ids;
* :func:`select_mmr_ids` / :func:`select_mmr_ids_deferred` (the live rerank stage): token-id
  arrays, one row of intersection counts gathered per pick, never the whole matrix;
* :func:`select_mmr_jaccard` (the tuning evaluator): a Jaccard matrix captured once per question.

Redundancy is kept as one vector: after a pick it is raised to the pick's similarity row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, TypeVar

import numpy as np

from rag_lab.reranking.passage import enriched_passage
from rag_lab.searchutil.text import tokenize_simple
from rag_lab.searchutil.tokens import intersection_row_counter
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

__all__ = [
    "DEFAULT_MMR_LAMBDA",
    "MMRCandidate",
    "MMRStep",
    "apply_mmr",
    "mmr_token_sets",
    "mmr_trace",
    "select_mmr",
    "select_mmr_ids",
    "select_mmr_ids_deferred",
    "select_mmr_jaccard",
]

#: λ of the rerank stage (``PipelineParams.mmr_lambda``).
DEFAULT_MMR_LAMBDA: float = PipelineParams.model_fields["mmr_lambda"].default

R = TypeVar("R")

#: a pick's similarity row: ``row(c)[i]`` = Jaccard of candidate ``i`` with pick ``c``
SimilarityRows = Callable[[int], np.ndarray]


@dataclass(slots=True, frozen=True)
class MMRCandidate:
    """One candidate's terms at one step."""

    index: int
    relevance: float
    redundancy: float
    mmr: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {"index": self.index, "relevance": self.relevance, "redundancy": self.redundancy, "mmr": self.mmr}


@dataclass(slots=True, frozen=True)
class MMRStep:
    """One greedy step: the chosen candidate and the best ones it beat (for the workbench)."""

    step: int
    index: int
    relevance: float
    redundancy: float
    mmr: float
    runner_ups: list[MMRCandidate] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (runner-ups as dicts)."""
        return {
            "step": self.step,
            "index": self.index,
            "relevance": self.relevance,
            "redundancy": self.redundancy,
            "mmr": self.mmr,
            "runner_ups": [c.to_dict() for c in self.runner_ups],
        }


def _greedy(
    scores: np.ndarray,
    k: int,
    lam: float,
    similarity: SimilarityRows | None,
    trace_width: int | None = None,
) -> tuple[list[int], list[MMRStep]]:
    """Greedy MMR over ``scores`` (float64); ``similarity`` may be ``None`` only when ``k <= 1``.
    Returns the picks and, with ``trace_width``, each step with that many runner-ups (the best
    candidates left, by MMR value then index)."""
    n = scores.size
    if k <= 0 or n == 0:
        return [], []
    k = min(k, n)
    with np.errstate(invalid="ignore"):  # 0 × inf is NaN, which counts as -inf
        rel = lam * scores
    finite = bool(np.isfinite(rel).all())
    if not finite:
        rel = np.where(np.isnan(rel), -np.inf, rel)
    w = 1.0 - lam
    red = np.zeros(n, dtype=np.float64)
    values = np.empty(n, dtype=np.float64)
    penalty = np.empty(n, dtype=np.float64)
    taken = np.zeros(n, dtype=bool)
    selected: list[int] = []
    steps: list[MMRStep] = []
    for step in range(k):
        np.subtract(rel, np.multiply(red, w, out=penalty), out=values)  # rel - w * red
        c = int(values.argmax())  # the first maximum: the earliest index on ties
        if not finite:  # a pick's relevance is -inf; when nothing left beats -inf, the earliest left
            values[taken] = -np.inf
            c = int(values.argmax())
            if values[c] == -np.inf:
                c = int(np.flatnonzero(~taken)[0])
        selected.append(c)
        taken[c] = True
        if trace_width is not None:
            steps.append(_trace_step(step, c, scores, red, lam, values, taken, trace_width))
        rel[c] = -np.inf  # never picked again
        if step == k - 1:
            break
        assert similarity is not None
        np.maximum(red, similarity(c), out=red)
    return selected, steps


def _trace_step(
    step: int,
    c: int,
    scores: np.ndarray,
    red: np.ndarray,
    lam: float,
    values: np.ndarray,
    taken: np.ndarray,
    width: int,
) -> MMRStep:
    left = np.flatnonzero(~taken)
    v = values[left]
    v = np.where(np.isnan(v), -np.inf, v)
    best = left[np.lexsort((left, -v))[: max(0, width)]]
    return MMRStep(
        step=step,
        index=c,
        relevance=float(scores[c]),
        redundancy=float(red[c]),
        mmr=lam * float(scores[c]) - (1.0 - lam) * float(red[c]),
        runner_ups=[MMRCandidate(int(j), float(scores[j]), float(red[j]), float(values[j])) for j in best.tolist()],
    )


def _jaccard_rows(row_counts: Callable[[int], np.ndarray], sizes: np.ndarray) -> SimilarityRows:
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


def select_mmr_ids(
    scores: np.ndarray, ids: Sequence[np.ndarray], k: int, lam: float, trace_width: int | None = None
) -> tuple[list[int], list[MMRStep]]:
    """Greedy MMR from token-id arrays (each a set: no id twice), one row of intersection counts
    gathered per pick. Returns the picks and, with ``trace_width``, the steps."""
    s = np.asarray(scores, dtype=np.float64)
    if k <= 1 or s.size <= 1:  # relevance alone: no token is read
        return _greedy(s, k, lam, None, trace_width)
    sizes = np.array([a.size for a in ids], dtype=np.intp)
    if s.size != sizes.size:
        raise ValueError(f"select_mmr_ids: {sizes.size} token arrays for {s.size} scores")
    return _greedy(s, k, lam, _jaccard_rows(intersection_row_counter(ids), sizes), trace_width)


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


def select_mmr_jaccard(scores: np.ndarray, jaccard: np.ndarray, k: int, lam: float) -> list[int]:
    """Greedy MMR from a precomputed Jaccard matrix (``jaccard[i, j]`` as :func:`select_mmr_ids`
    computes it from the counts): one pick reads one matrix row."""
    s = np.asarray(scores, dtype=np.float64)
    rows = np.asarray(jaccard, dtype=np.float64)
    return _greedy(s, k, lam, rows.__getitem__ if k > 1 and s.size > 1 else None)[0]


def mmr_token_sets(results: Sequence[SearchResult]) -> list[set[str]]:
    """``tokenize_simple(enriched_passage(r))`` for each result."""
    return [tokenize_simple(enriched_passage(r)) for r in results]


def _scores_of(items: Sequence[Any]) -> tuple[list[float], bool]:
    """Scores, and whether the items were plain numbers."""
    if all(isinstance(x, Real) and not isinstance(x, bool) for x in items):
        return [float(x) for x in items], True
    return [float(x.score) for x in items], False


def _token_sets(
    items: Sequence[Any], numeric: bool, token_sets: Sequence[set[str] | frozenset[str]] | None
) -> Sequence[set[str] | frozenset[str]]:
    if token_sets is not None:
        if len(token_sets) != len(items):
            raise ValueError(f"select_mmr: token_sets has {len(token_sets)} entries for {len(items)} items")
        return token_sets
    if numeric:
        raise ValueError("select_mmr: plain scores with k > 1 need token_sets")
    return mmr_token_sets(items)


def _ids_of_sets(token_sets: Sequence[set[str] | frozenset[str]]) -> list[np.ndarray]:
    """Token sets as id arrays (ids numbered in order of first sight), for :func:`select_mmr_ids`."""
    vocab: dict[str, int] = {}
    return [
        np.fromiter((vocab.setdefault(t, len(vocab)) for t in ts), dtype=np.intp, count=len(ts)) for ts in token_sets
    ]


def _run(
    items: Sequence[Any],
    k: int,
    lam: float,
    token_sets: Sequence[set[str] | frozenset[str]] | None,
    trace_width: int | None,
) -> tuple[list[int], list[MMRStep]]:
    if k <= 0 or len(items) == 0:
        return [], []
    scores, numeric = _scores_of(items)
    s = np.array(scores, dtype=np.float64)
    if k == 1:
        return _greedy(s, k, lam, None, trace_width)
    ids = _ids_of_sets(_token_sets(items, numeric, token_sets))
    return select_mmr_ids(s, ids, k, lam, trace_width)


def select_mmr(
    results_or_scores: Sequence[Any],
    k: int,
    lam: float = DEFAULT_MMR_LAMBDA,
    token_sets: Sequence[set[str] | frozenset[str]] | None = None,
) -> list[int]:
    """Indices of up to ``k`` items in MMR selection order.

    ``results_or_scores`` holds objects with ``.score`` (search results) or plain numbers.
    Token sets default to ``tokenize_simple(enriched_passage(r))`` for results; plain scores
    need ``token_sets`` when ``k > 1``. ``k == 1`` returns the index of the best
    ``λ·score`` (the earliest on ties) without tokenising.

    The second passage repeats the first, so the less relevant but new third one is picked next:

    >>> select_mmr([0.9, 0.85, 0.5], k=2, lam=0.7, token_sets=[{"red", "bridge"}, {"red", "bridge"}, {"tide"}])
    [0, 2]
    """
    return _run(results_or_scores, k, lam, token_sets, None)[0]


def mmr_trace(
    results_or_scores: Sequence[Any],
    k: int,
    lam: float = DEFAULT_MMR_LAMBDA,
    token_sets: Sequence[set[str] | frozenset[str]] | None = None,
    runner_ups: int = 3,
) -> list[MMRStep]:
    """``select_mmr`` step by step: each pick's relevance, redundancy and MMR value, with the
    ``runner_ups`` best candidates left at that step (by MMR value, then index)."""
    return _run(results_or_scores, k, lam, token_sets, max(0, runner_ups))[1]


def apply_mmr(results: Sequence[R], k: int, lam: float = DEFAULT_MMR_LAMBDA) -> list[R]:
    """The results ``select_mmr`` picks, in selection order (§6.8)."""
    return [results[i] for i in select_mmr(results, k, lam)]
