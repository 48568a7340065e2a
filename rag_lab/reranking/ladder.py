"""The rerank stage's threshold ladder (spec §4.6.1, seed), on the model's output as arrays.

The model answers ``(index, relevance_score)`` pairs in its own order; :func:`model_arrays` turns
them into two arrays. The ladder keeps the pairs with a valid index (``0 <= index < n``) and a
score at or above the threshold, in the model's order; when none pass, the best valid one alone
if it reaches ``fallback_min`` (outcome ``fallback_top1``, the first on ties; a NaN score never
passes and is never the fallback); else nothing (``all_below_threshold``). When that keeps nothing and the threshold is above
``rerank_degrade_floor``, the model is asked again and the same filter runs at
``max(threshold × rerank_degrade_factor, floor)`` (outcome ``threshold_degraded`` when it keeps
something).

:func:`threshold_ladder_steps` is the one place that decides it. The live stage drives it with
:func:`run_threshold_ladder` (the model called again for the retry); the tuning evaluator, the
workbench and the tests with :func:`apply_threshold_ladder` (the captured scores reused: a
deterministic model gives the same scores again).

>>> from rag_lab.types.params import PipelineParams
>>> idx, score = model_arrays([(0, 0.2), (1, 0.35), (2, 0.1)])
>>> lad = apply_threshold_ladder(idx, score, 3, 0.5, 0.4, PipelineParams())
>>> lad.positions.tolist(), lad.outcome, round(lad.threshold_used, 2)  # max(0.5 × 0.7, 0.3)
([1], 'threshold_degraded', 0.35)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_lab.types.params import PipelineParams

__all__ = [
    "LadderOutcome",
    "apply_threshold_ladder",
    "degraded_threshold",
    "filter_by_threshold",
    "model_arrays",
    "run_threshold_ladder",
    "threshold_ladder_steps",
]

#: the model's answer as arrays: candidate indices and scores, in the model's order
ModelArrays = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True, slots=True)
class LadderOutcome:
    """Kept positions (into the model's output, in its order), the outcome label and the
    threshold that produced them (the degraded one after a retry)."""

    positions: np.ndarray
    outcome: str
    threshold_used: float


def model_arrays(scores: Iterable[Any]) -> ModelArrays:
    """``(index, score)`` arrays from :class:`~rag_lab.models.base.RerankScore` items or pairs."""
    pairs = [(s.index, s.relevance_score) if hasattr(s, "relevance_score") else (s[0], s[1]) for s in scores]
    index = np.fromiter((int(i) for i, _ in pairs), dtype=np.intp, count=len(pairs))
    score = np.fromiter((float(x) for _, x in pairs), dtype=np.float64, count=len(pairs))
    return index, score


def filter_by_threshold(
    index: np.ndarray, score: np.ndarray, n: int, threshold: float, fallback_min: float
) -> tuple[np.ndarray, str]:
    """Positions with a valid index and score >= threshold, in the model's order; when none pass,
    the best valid one alone if it reaches ``fallback_min`` (``fallback_top1``)."""
    valid = (index >= 0) & (index < n)
    passing = np.flatnonzero(valid & (score >= threshold))
    if passing.size:
        return passing, "ok"
    if valid.any():
        candidates = np.where(valid & ~np.isnan(score), score, -np.inf)
        best = int(np.argmax(candidates))  # the first maximum
        if candidates[best] >= fallback_min:
            return np.array([best], dtype=np.intp), "fallback_top1"
    return np.empty(0, dtype=np.intp), "all_below_threshold"


def degraded_threshold(threshold: float, params: PipelineParams) -> float | None:
    """The retry threshold of the ladder, ``max(threshold × factor, floor)``, or ``None`` when the
    threshold is not above the floor (no retry)."""
    if threshold > params.rerank_degrade_floor:
        return max(threshold * params.rerank_degrade_factor, params.rerank_degrade_floor)
    return None


def threshold_ladder_steps(
    n: int, threshold: float, fallback_min: float, params: PipelineParams
) -> Generator[float, ModelArrays, LadderOutcome]:
    """Yields the threshold of each model call, is sent that call's arrays, returns the outcome."""
    index, score = yield threshold
    kept, outcome = filter_by_threshold(index, score, n, threshold, fallback_min)
    retry = degraded_threshold(threshold, params) if not kept.size else None
    if retry is None:
        return LadderOutcome(kept, outcome, threshold)
    index, score = yield retry
    kept, outcome = filter_by_threshold(index, score, n, retry, fallback_min)
    return LadderOutcome(kept, "threshold_degraded" if kept.size else outcome, retry)


def apply_threshold_ladder(
    index: np.ndarray,
    score: np.ndarray,
    n: int,
    threshold: float,
    fallback_min: float,
    params: PipelineParams,
    retry: Callable[[float], ModelArrays] | None = None,
) -> LadderOutcome:
    """The ladder on the first call's arrays; the retry is scored by ``retry(threshold)`` when
    given, else reuses the same arrays."""
    steps = threshold_ladder_steps(n, threshold, fallback_min, params)
    at, answer = next(steps), (index, score)
    while True:
        try:
            at = steps.send(answer)
        except StopIteration as done:
            result: LadderOutcome = done.value
            return result
        if retry is not None:
            answer = retry(at)


async def run_threshold_ladder(
    score_at: Callable[[float], Awaitable[ModelArrays]],
    n: int,
    threshold: float,
    fallback_min: float,
    params: PipelineParams,
) -> tuple[LadderOutcome, ModelArrays]:
    """The ladder with each call's arrays from ``await score_at(threshold)``; returns the outcome
    and the last call's arrays. The model's errors propagate."""
    steps = threshold_ladder_steps(n, threshold, fallback_min, params)
    at = next(steps)
    while True:
        answer = await score_at(at)
        try:
            at = steps.send(answer)
        except StopIteration as done:
            result: LadderOutcome = done.value
            return result, answer
