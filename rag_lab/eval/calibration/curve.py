"""Threshold calibration from captured rerank scores: which threshold separates gold candidates
from the rest.

A *candidate* is one rerank input of one question (:class:`~rag_lab.tuning.inputs.CapturedRerank`);
it is **gold** when its document id is one of the question's gold ids. :func:`score_samples`
collects, per candidate, the raw model score (what ``rerank_threshold`` is compared with), the
search score and the vector / keyword scores the search recorded for that chunk (NaN where a path
did not find it).

The ladder keeps a candidate when ``score >= threshold`` (spec §4.6.1), so the curve is over
thresholds ``t`` with *predicted positive* = ``score >= t``. :func:`pr_curve` gives precision,
recall and F1 at every distinct score (the only thresholds at which anything changes); the picks:

* :func:`best_f1` — the threshold of the highest F1; ties go to the **highest** such threshold
  (fewest candidates kept for the same F1);
* :func:`for_precision` — the **lowest** threshold whose precision reaches the target (the most
  recall that still has that precision);
* :func:`for_recall` — the **highest** threshold whose recall reaches the target.

These are candidate-level numbers; what a threshold does to the final contexts (the degraded
retry, the top-1 fallback, MMR, merge, top-K) is measured end to end by
:mod:`rag_lab.eval.calibration` with the fast evaluator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import TypedDict

import numpy as np

from rag_lab.tuning.inputs import QuestionInputs

__all__ = [
    "Curve",
    "ScoreSamples",
    "best_f1",
    "for_precision",
    "for_recall",
    "pr_curve",
    "score_samples",
    "short_threshold",
]


@dataclass
class ScoreSamples:
    """One entry per rerank candidate of the labelled questions (arrays aligned)."""

    qid: list[str] = field(default_factory=list)
    doc_id: list[str] = field(default_factory=list)
    gold: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    model: np.ndarray = field(default_factory=lambda: np.zeros(0))  # raw rerank model score
    search: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the search stage's score
    vector: np.ndarray = field(default_factory=lambda: np.zeros(0))  # NaN: not on the vector path
    keyword: np.ndarray = field(default_factory=lambda: np.zeros(0))  # NaN: not on the keyword path
    #: questions without a rerank (no candidates, model error, failed capture): id -> why
    skipped: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.model.size)

    def scores(self, kind: str = "model") -> np.ndarray:
        if kind not in ("model", "search", "vector", "keyword"):
            raise ValueError(f"score kind must be model, search, vector or keyword, got {kind!r}")
        return np.asarray(getattr(self, kind), dtype=np.float64)

    def score_range(self) -> tuple[float, float] | None:
        """``(min, max)`` of the raw model scores seen (None: none seen)."""
        s = self.model[np.isfinite(self.model)]
        return (float(s.min()), float(s.max())) if s.size else None


def _path_scores(q: QuestionInputs, path: str) -> dict[str, float]:
    """Chunk id -> the best score of that chunk on one search path (over the search calls)."""
    out: dict[str, float] = {}
    sp = q.search_paths
    for call in (sp.calls or []) if sp is not None else []:
        for hit in call.get(path) or []:
            cid, score = str(hit[0]), float(hit[2])
            if cid not in out or score > out[cid]:
                out[cid] = score
    return out


class _Columns(TypedDict):
    """The candidates' columns :func:`score_samples` collects."""

    qid: list[str]
    doc: list[str]
    gold: list[bool]
    model: list[float]
    search: list[float]
    vector: list[float]
    keyword: list[float]


def score_samples(inputs: Iterable[QuestionInputs], gold_ids: Mapping[str, Iterable[str]]) -> ScoreSamples:
    """Every candidate's scores and gold label (questions without gold ids are left out)."""
    rows: _Columns = {"qid": [], "doc": [], "gold": [], "model": [], "search": [], "vector": [], "keyword": []}
    skipped: dict[str, str] = {}
    for q in inputs:
        gold = set(gold_ids.get(q.qid, ()))
        if not gold:
            skipped[q.qid] = "no gold ids"
            continue
        cr = q.rerank
        if q.error or cr is None or not cr.candidates or cr.error:
            skipped[q.qid] = q.error or (cr.error if cr is not None and cr.error else "no rerank candidates")
            continue
        n = len(cr.candidates)
        model = {int(i): float(s) for i, s in zip(cr.model_index, cr.model_score) if 0 <= i < n}
        vec, kw = _path_scores(q, "vector"), _path_scores(q, "keyword")
        for i, r in enumerate(cr.candidates):
            if i not in model:  # the model returned no score for it: the ladder never sees it
                continue
            rows["qid"].append(q.qid)
            rows["doc"].append(r.knowledge_id)
            rows["gold"].append(r.knowledge_id in gold)
            rows["model"].append(model[i])
            rows["search"].append(float(cr.search_score[i]))
            rows["vector"].append(vec.get(r.id, math.nan))
            rows["keyword"].append(kw.get(r.id, math.nan))
    return ScoreSamples(
        qid=rows["qid"],
        doc_id=rows["doc"],
        gold=np.array(rows["gold"], dtype=bool),
        model=np.array(rows["model"], dtype=np.float64),
        search=np.array(rows["search"], dtype=np.float64),
        vector=np.array(rows["vector"], dtype=np.float64),
        keyword=np.array(rows["keyword"], dtype=np.float64),
        skipped=skipped,
    )


@dataclass(frozen=True)
class Curve:
    """Precision / recall / F1 of ``score >= threshold`` at each distinct score, thresholds
    descending. Precision with nothing kept is 1 by convention (never reached here: every
    threshold is a score, so at least one candidate is kept)."""

    threshold: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    kept: np.ndarray  # candidates with score >= threshold
    n_gold: int
    n: int

    def at(self, threshold: float) -> dict[str, float]:
        """Precision, recall, F1 and kept count of ``score >= threshold`` (any threshold)."""
        i = int(np.searchsorted(-self.threshold, -threshold, side="right")) - 1  # last t_i >= threshold
        if i < 0:  # above every score: nothing kept
            return {"precision": 1.0, "recall": 0.0, "f1": 0.0, "kept": 0.0}
        return {
            "precision": float(self.precision[i]),
            "recall": float(self.recall[i]),
            "f1": float(self.f1[i]),
            "kept": float(self.kept[i]),
        }


def pr_curve(scores: Sequence[float] | np.ndarray, gold: Sequence[bool] | np.ndarray) -> Curve:
    """The curve over every distinct finite score (see the module doc)."""
    s = np.asarray(scores, dtype=np.float64)
    g = np.asarray(gold, dtype=bool)
    if s.shape != g.shape:
        raise ValueError(f"scores and gold labels differ in length ({s.size} vs {g.size})")
    ok = np.isfinite(s)
    s, g = s[ok], g[ok]
    if not s.size:
        z = np.zeros(0)
        return Curve(z, z, z, z, z, 0, 0)
    order = np.argsort(-s, kind="stable")
    s, g = s[order], g[order]
    tp = np.cumsum(g)
    # the last position of each distinct score: everything >= that score is kept
    last = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    kept = (last + 1).astype(np.float64)
    tp_t = tp[last].astype(np.float64)
    n_gold = int(g.sum())
    precision = tp_t / kept
    recall = tp_t / n_gold if n_gold else np.zeros_like(tp_t)
    # F1 = 2·TP / (kept + gold): one correctly rounded division, so equal F1s are equal floats
    # (2·P·R / (P + R) can differ in the last bit between two thresholds of the same F1)
    f1 = 2 * tp_t / (kept + n_gold)
    return Curve(s[last], precision, recall, f1, kept, n_gold, int(s.size))


def best_f1(curve: Curve) -> float | None:
    """The highest threshold with the highest F1 (None: no scores, or no gold candidate)."""
    if not curve.threshold.size or curve.n_gold == 0:
        return None
    best = curve.f1.max()
    return float(curve.threshold[np.flatnonzero(curve.f1 == best)[0]])  # descending: first = highest


def for_precision(curve: Curve, target: float) -> float | None:
    """The lowest threshold whose precision is >= ``target`` (None: no threshold reaches it)."""
    hits = np.flatnonzero(curve.precision >= target) if curve.n_gold else np.zeros(0, dtype=int)
    return float(curve.threshold[hits[-1]]) if hits.size else None


def for_recall(curve: Curve, target: float) -> float | None:
    """The highest threshold whose recall is >= ``target`` (None: no threshold reaches it)."""
    hits = np.flatnonzero(curve.recall >= target) if curve.n_gold else np.zeros(0, dtype=int)
    return float(curve.threshold[hits[0]]) if hits.size else None


def short_threshold(curve: Curve, threshold: float) -> float:
    """The shortest decimal (2 to 12 places, rounded down) that keeps exactly the candidates
    ``threshold`` keeps: above the next lower score of the curve, at most ``threshold``. A
    suggestion printed with it is the value applied (0.26717… shown as 0.2672 would drop the
    candidate scored 0.26717…).

    >>> c = pr_curve([0.26717234, 0.2671, 0.5], [True, False, True])
    >>> short_threshold(c, 0.26717234), short_threshold(c, 0.5)
    (0.26717, 0.5)
    """
    below = curve.threshold[curve.threshold < threshold]
    floor = float(below.max()) if below.size else -math.inf
    exact = Decimal(repr(float(threshold)))
    for places in range(2, 13):
        r = float(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_FLOOR))
        if r > floor:
            return r
    return float(threshold)
