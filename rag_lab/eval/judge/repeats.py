"""A judge's repeated scores of one question (``eval --judge-repeats N``): their spread, and when
the question is *unstable*.

**Unstable.** A question is unstable on a judge metric at tolerance ``tol`` when its finite
repeats spread wider than the tolerance, ``max - min > tol``, or when some repeats are NaN (the
judge could not score it every time) and others are not. The tolerance is the gate's for that
metric (``--tolerance`` / ``--metric NAME:TOL``, default
:data:`~rag_lab.eval.metric_defs.GATE_TOLERANCE`): the judge alone moves such a question by more
than the gate lets the mean move. The gate keeps every question in its paired test, as the mean of
its repeats (the spread widens the interval), and lists the unstable ones; the definition needs no
baseline value, so the eval report marks the same questions the gate lists.

>>> repeat_stats([0.5, 1.0, 0.75])["std"]  # sample standard deviation (ddof = 1)
0.25
>>> is_unstable([0.5, 1.0, 0.75], 0.02), is_unstable([0.8, 0.8, 0.81], 0.02)
(True, False)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

__all__ = ["is_unstable", "repeat_stats", "unstable_qids"]


class RepeatStats(TypedDict):
    """The spread of one question's repeated scores (:func:`repeat_stats`)."""

    n: int
    n_valid: int
    mean: float
    min: float
    max: float
    spread: float
    std: float


def repeat_stats(values: Sequence[float]) -> RepeatStats:
    """``n``, ``n_valid``, ``mean``, ``min``, ``max``, ``spread`` (max - min) and ``std`` (sample
    standard deviation, ddof = 1; 0 for one valid repeat) over the finite repeats (NaN when none)."""
    ok = [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not ok:
        nan = math.nan
        return {"n": len(values), "n_valid": 0, "mean": nan, "min": nan, "max": nan, "spread": nan, "std": nan}
    mean = math.fsum(ok) / len(ok)
    var = math.fsum((v - mean) ** 2 for v in ok) / (len(ok) - 1) if len(ok) > 1 else 0.0
    return {
        "n": len(values),
        "n_valid": len(ok),
        "mean": mean,
        "min": min(ok),
        "max": max(ok),
        "spread": max(ok) - min(ok),
        "std": math.sqrt(var),
    }


def is_unstable(values: Sequence[float], tolerance: float) -> bool:
    """Whether repeats ``values`` are unstable at ``tolerance`` (see the module docstring)."""
    st = repeat_stats(values)
    if 0 < st["n_valid"] < st["n"]:
        return True
    return bool(st["n_valid"] >= 2 and st["spread"] > tolerance)


def unstable_qids(qids: Sequence[str], repeats: Sequence[Sequence[float]], tolerance: float) -> list[str]:
    """The unstable questions among ``qids`` (aligned with their ``repeats``), in order."""
    return [q for q, vals in zip(qids, repeats) if is_unstable(vals, tolerance)]


def suite_unstable(ragas: Any, metric: str, tolerance: float) -> list[str]:
    """The unstable questions of a suite's :class:`~rag_lab.eval.ragas_adapter.RagasResult` on
    ``metric`` (none without repeats)."""
    reps: Mapping[str, list[list[float]]] = getattr(ragas, "repeats", None) or {}
    if metric not in reps:
        return []
    return unstable_qids(ragas.qids, reps[metric], tolerance)
