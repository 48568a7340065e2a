"""How saturated a question set is: per metric, the share of questions already at the metric's
best value (the ceiling) and at its worst (the floor).

A question at the ceiling cannot show an improvement, only a loss; a set where most questions sit
there (a generated set whose questions repeat their source's words, say) cannot tell a better
config from the current one, whatever its mean. Questions at the floor are real losses, or
questions the pipeline can never answer. The shares are of the questions with a value (NaN left
out); the best and worst values come from :mod:`rag_lab.eval.metric_defs`.

>>> sat = saturation({"recall@10": {"q1": 1.0, "q2": 1.0, "q3": 0.5, "q4": 0.0}})
>>> sat["recall@10"].ceiling_share, sat["recall@10"].floor_share
(0.5, 0.25)
>>> saturation_line(sat)
'saturation: recall@10 50% of 4 questions at 1 (25% at 0)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_lab.eval.metric_defs import is_known_metric, metric

__all__ = ["SATURATED_SHARE", "SHOWN", "Saturation", "saturation", "saturation_line", "saturation_problems"]

#: a metric with at least this share of questions at its ceiling is called saturated
SATURATED_SHARE = 0.9
#: the metrics :func:`saturation_line` names, when the set has them
SHOWN: tuple[str, ...] = ("recall@10", "ndcg@10", "mrr", "hit@1")
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Saturation:
    """One metric's counts: ``n`` questions with a value, ``at_ceiling`` at its best value,
    ``at_floor`` at its worst."""

    metric: str
    n: int
    at_ceiling: int
    at_floor: int

    @property
    def ceiling_share(self) -> float:
        return self.at_ceiling / self.n if self.n else math.nan

    @property
    def floor_share(self) -> float:
        return self.at_floor / self.n if self.n else math.nan

    def to_dict(self) -> dict[str, int]:
        return {"n": self.n, "at_ceiling": self.at_ceiling, "at_floor": self.at_floor}


def saturation(values: Mapping[str, Mapping[str, float] | Sequence[float]]) -> dict[str, Saturation]:
    """Per metric of ``values`` (``{metric: {qid: value}}`` or ``{metric: [values]}``) its
    :class:`Saturation`; metrics with an unbounded range (latency) or an unknown name are left out."""
    out: dict[str, Saturation] = {}
    for name, per in values.items():
        if not is_known_metric(name):
            continue
        m = metric(name)
        if not (math.isfinite(m.low) and math.isfinite(m.high)):
            continue
        vals = [float(v) for v in (per.values() if isinstance(per, Mapping) else per) if _finite(v)]
        top = sum(1 for v in vals if abs(v - m.best) <= _EPS)
        bottom = sum(1 for v in vals if abs(v - m.worst) <= _EPS)
        out[name] = Saturation(name, len(vals), top, bottom)
    return out


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _pct(share: float) -> str:
    return f"{round(100 * share)}%"


def saturation_line(sat: Mapping[str, Saturation], shown: Sequence[str] = SHOWN) -> str:
    """``saturation: recall@10 92% of 50 questions at 1 (2% at 0), ndcg@10 40% at 1 …`` for the
    metrics of ``shown`` that ``sat`` has (else its first three), then, when one is saturated
    (:data:`SATURATED_SHARE`), what that means for comparing configs."""
    names = [m for m in shown if m in sat and sat[m].n] or [m for m in sat if sat[m].n][:3]
    if not names:
        return "saturation: no question has a value"
    parts = []
    for i, name in enumerate(names):
        s = sat[name]
        best = metric(name).best
        n = f" of {s.n} questions" if i == 0 else ""
        floor = f" ({_pct(s.floor_share)} at {metric(name).worst:g})" if s.at_floor else ""
        parts.append(f"{name} {_pct(s.ceiling_share)}{n} at {best:g}{floor}")
    line = "saturation: " + ", ".join(parts)
    full = [m for m in names if sat[m].ceiling_share >= SATURATED_SHARE]
    if full:
        line += f"; saturated on {', '.join(full)}: a better config cannot show there, only a worse one"
    return line


_COUNTS = ("n", "at_ceiling", "at_floor")


def saturation_problems(sat: object) -> list[tuple[tuple[str, ...], str]]:
    """What is wrong with a report's ``saturation`` object (``{metric: {"n", "at_ceiling",
    "at_floor"}}``), as ``(location, problem)`` pairs (location ``()``: the object itself, else
    ``(metric,)``); null is allowed (a report written before the field)."""
    if sat is None:
        return []
    if not isinstance(sat, Mapping):
        return [((), f"is a {type(sat).__name__}, not an object")]
    out: list[tuple[tuple[str, ...], str]] = []
    for m, v in sat.items():
        at = (str(m),)
        if not is_known_metric(str(m)):
            out.append((at, "unknown metric name"))
        elif not isinstance(v, Mapping) or not all(_count(v.get(k)) for k in _COUNTS):
            out.append((at, f"{v!r}: expected the counts {', '.join(_COUNTS)} (integers >= 0)"))
        elif max(v["at_ceiling"], v["at_floor"]) > v["n"]:
            out.append((at, f"more questions at the ceiling or the floor than the {v['n']} with a value"))
    return out


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0
