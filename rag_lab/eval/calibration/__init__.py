"""``rag-lab calibrate``: a rerank threshold chosen from a labelled slice's captured model scores,
and what it does end to end.

1. Each question is captured once (:func:`rag_lab.eval.cache.captures.acapture_cached`, through the
   stage cache when the lab has it): the rerank candidates and their raw model scores.
2. Candidates are labelled gold / non-gold by their document id (:func:`.curve.score_samples`),
   and the precision / recall / F1 curve over the threshold gives the suggestions: best F1, and
   the thresholds reaching ``target_precision`` / ``target_recall``, next to the current threshold.
3. Each suggestion is replayed through the real ladder with the fast evaluator
   (:class:`rag_lab.tuning.FastEvaluator`, ``rerank_threshold`` set): the ×0.7 degraded retry,
   the top-1 fallback, composite score, MMR, merge and FILTER_TOP_K as the pipeline runs them.
   Reported: recall@k of the final contexts and how many questions each rung served
   (``ok``: the threshold kept something; ``threshold_degraded``; ``fallback_top1``; ``nothing``:
   no context, the answer is the fallback response).

The result stores the reranker's id (as reports' provenance names it) and the observed score
range; :func:`check_calibration` warns when a lab's reranker or score range is not the one a
calibration was made with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.eval.calibration.curve import (
    Curve,
    best_f1,
    for_precision,
    for_recall,
    pr_curve,
    score_samples,
    short_threshold,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.lab.lab import Lab
    from rag_lab.tuning import FastEvaluator

__all__ = [
    "CALIBRATION_FORMAT",
    "Calibration",
    "acalibrate",
    "check_calibration",
    "end_to_end",
    "load_calibration",
]

CALIBRATION_FORMAT = 1
OUTCOMES = ("ok", "threshold_degraded", "fallback_top1", "nothing", "not_run", "model_error", "error")


def _summary(values: np.ndarray) -> dict[str, float]:
    v = values[np.isfinite(values)]
    if not v.size:
        return {"n": 0}
    q = np.quantile(v, [0.05, 0.25, 0.5, 0.75, 0.95])
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "min": float(v.min()),
        "p05": float(q[0]),
        "p25": float(q[1]),
        "median": float(q[2]),
        "p75": float(q[3]),
        "p95": float(q[4]),
        "max": float(v.max()),
    }


@dataclass
class Calibration:
    """What ``rag-lab calibrate`` found (JSON: :meth:`to_dict`)."""

    model_id: str
    suite: str
    score_range: list[float] | None  # observed raw model scores [min, max]
    declared_range: list[float] | None  # the reranker's declared score_range, if any
    n_questions: int
    n_candidates: int
    n_gold: int
    current_threshold: float
    distributions: dict[str, dict[str, dict[str, float]]]  # kind -> gold / other -> summary
    curve: dict[str, list[float]]  # threshold, precision, recall, f1, kept (thresholds descending)
    suggestions: list[dict[str, Any]]  # name, threshold, precision, recall, f1, end_to_end
    skipped: dict[str, str] = field(default_factory=dict)
    ks: list[int] = field(default_factory=lambda: [1, 3, 5, 10])
    #: the raw model scores of gold / other candidates (the plot's histograms)
    gold_scores: list[float] = field(default_factory=list)
    other_scores: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"format": CALIBRATION_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        body = {k: v for k, v in d.items() if k != "format"}
        return cls(**body)

    def suggestion(self, name: str) -> dict[str, object] | None:
        return next((s for s in self.suggestions if s["name"] == name), None)

    def markdown(self) -> str:
        lo_hi = (
            f"[{self.score_range[0]:.4f}, {self.score_range[1]:.4f}]" if self.score_range else "none (no model scores)"
        )
        lines = [
            f"# Rerank threshold calibration: {self.suite}",
            "",
            f"Reranker `{self.model_id}`; observed raw scores {lo_hi}"
            + (f" (declared range {self.declared_range})" if self.declared_range else "")
            + f"; {self.n_questions} questions, {self.n_candidates} candidates, {self.n_gold} gold.",
            "",
            "| scores | gold mean | gold median | other mean | other median |",
            "|---|---|---|---|---|",
        ]
        for kind, d in self.distributions.items():
            g, o = d.get("gold", {}), d.get("other", {})
            lines.append(
                f"| {kind} | {_f(g.get('mean'))} | {_f(g.get('median'))} | {_f(o.get('mean'))} | {_f(o.get('median'))} |"
            )
        ks = self.ks
        head = ["suggestion", "threshold", "precision", "recall", "F1", *(f"recall@{k}" for k in ks)]
        head += ["ok", "degraded", "top-1", "nothing"]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for s in self.suggestions:
            e = s.get("end_to_end") or {}
            o = e.get("outcomes", {})
            t = s.get("threshold")
            cells = [
                s["name"],
                repr(t) if isinstance(t, float) else "—",
                *(_f(s.get(k)) for k in ("precision", "recall", "f1")),
            ]
            cells += [_f(e.get(f"recall@{k}")) for k in ks]
            cells += [str(o.get(x, 0)) for x in ("ok", "threshold_degraded", "fallback_top1", "nothing")]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [
            "",
            "Precision / recall / F1 are over candidates (`score >= threshold`); recall@k and the rung "
            "counts are end to end, through the threshold ladder (degraded retry, top-1 fallback), MMR, "
            "merge and top-K (the fast evaluator).",
        ]
        if self.skipped:
            lines += ["", f"{len(self.skipped)} questions without model scores: " + ", ".join(sorted(self.skipped))]
        return "\n".join(lines) + "\n"


def _f(v: object) -> str:
    return f"{v:.4f}" if isinstance(v, (int, float)) and math.isfinite(v) else "—"


def end_to_end(
    fe: FastEvaluator, threshold: float, gold: Mapping[str, Sequence[str]], ks: Sequence[int]
) -> dict[str, object]:
    """Recall@k of the final contexts under ``rerank_threshold = threshold`` (other params as
    ``fe.base``) and the questions per ladder rung, by the fast evaluator."""
    from rag_lab.eval.metrics import evaluate_retrieval
    from rag_lab.tuning import doc_ids

    p = fe.params_for({"rerank_threshold": float(threshold)})
    runs: dict[str, list[str]] = {}
    outcomes: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for q in fe.inputs:
        outcome, refs = fe.references(q, p)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        runs[q.qid] = doc_ids(refs)
    report = evaluate_retrieval(runs, {qid: set(g) for qid, g in gold.items() if qid in runs}, ks=ks)
    summ = report.summary()
    out: dict[str, object] = {f"recall@{k}": summ[f"recall@{k}"] for k in ks}
    out["outcomes"] = outcomes
    return out


def _curve_dict(c: Curve) -> dict[str, list[float]]:
    return {
        "threshold": c.threshold.tolist(),
        "precision": c.precision.tolist(),
        "recall": c.recall.tolist(),
        "f1": c.f1.tolist(),
        "kept": c.kept.tolist(),
    }


async def acalibrate(
    lab: Lab,
    dataset: Dataset,
    kb: str,
    params: Mapping[str, object] | None = None,
    target_precision: float | None = None,
    target_recall: float | None = None,
    ks: Sequence[int] = (1, 3, 5, 10),
    suite: str = "",
) -> Calibration:
    """Calibrate ``rerank_threshold`` on ``dataset`` (ingested as ``kb``) under the lab's params
    with ``params`` on top (see the module doc)."""
    from rag_lab.eval.cache.captures import acapture_cached
    from rag_lab.eval.gate.provenance import lab_models
    from rag_lab.eval.runner import faq_kb_name
    from rag_lab.eval.sweep.fast import capture_requests
    from rag_lab.tuning import FastEvaluator

    for name, v in (("target precision", target_precision), ("target recall", target_recall)):
        if v is not None and not 0.0 < v <= 1.0:
            raise ValueError(f"{name} must be in (0, 1], got {v}")
    base = lab.params.with_changes(**dict(params or {}))
    kbs = [kb] + ([faq_kb_name(kb)] if dataset.faq else [])
    inputs = await acapture_cached(lab, capture_requests(dataset, dataset.queries), kbs, base)
    gold = {q.id: list(q.gold_ids) for q in dataset.queries}
    samples = score_samples(inputs, gold)
    curve = pr_curve(samples.model, samples.gold)
    fe = FastEvaluator(inputs, base)
    picks: list[tuple[str, float | None]] = [("current", float(base.rerank_threshold)), ("best F1", best_f1(curve))]
    if target_precision is not None:
        picks.append((f"precision >= {target_precision:g}", for_precision(curve, target_precision)))
    if target_recall is not None:
        picks.append((f"recall >= {target_recall:g}", for_recall(curve, target_recall)))
    suggestions: list[dict[str, object]] = []
    for name, t in picks:
        if t is None:
            suggestions.append({"name": name, "threshold": None, "note": "no threshold reaches it"})
            continue
        if name != "current":  # a short value that keeps the same candidates: the value printed is the one applied
            t = short_threshold(curve, t)
        at = curve.at(t)
        try:
            e2e: dict[str, object] | None = end_to_end(fe, t, gold, ks)
            note = ""
        except ValueError as exc:  # outside the params' range
            e2e, note = None, str(exc)
        suggestions.append(
            {"name": name, "threshold": t, **{k: at[k] for k in ("precision", "recall", "f1")}, "kept": at["kept"]}
            | {"end_to_end": e2e, "note": note}
        )
    declared = getattr(lab, "rerank_score_range", None)
    rng = samples.score_range()
    return Calibration(
        model_id=lab_models(lab).get("reranker", "none"),
        suite=suite or dataset.name,
        score_range=list(rng) if rng else None,
        declared_range=[float(declared[0]), float(declared[1])] if declared else None,
        n_questions=len(dataset.queries),
        n_candidates=len(samples),
        n_gold=int(samples.gold.sum()),
        current_threshold=float(base.rerank_threshold),
        distributions={
            kind: {
                "gold": _summary(samples.scores(kind)[samples.gold]),
                "other": _summary(samples.scores(kind)[~samples.gold]),
            }
            for kind in ("model", "search", "vector", "keyword")
        },
        curve=_curve_dict(curve),
        suggestions=suggestions,
        skipped=dict(samples.skipped),
        ks=list(ks),
        gold_scores=samples.model[samples.gold].tolist(),
        other_scores=samples.model[~samples.gold].tolist(),
    )


def load_calibration(path: str | Path) -> Calibration:
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{p}: file not found") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON: {exc}") from None
    if not isinstance(d, dict) or d.get("format") != CALIBRATION_FORMAT or "model_id" not in d:
        raise ValueError(f"{p}: not a rag-lab calibration result (format {CALIBRATION_FORMAT})")
    return Calibration.from_dict(d)


def check_calibration(cal: Calibration, model_id: str, score_range: Sequence[float] | None = None) -> list[str]:
    """Warnings when ``model_id`` (the reranker now) or the raw score range seen now is not the
    calibration's."""
    from rag_lab.eval.score_range import range_warning

    out: list[str] = []
    if model_id != cal.model_id:
        out.append(
            f"the reranker differs from the calibration's ({cal.model_id!r} → {model_id!r}): its thresholds "
            f"(best F1 {_f((cal.suggestion('best F1') or {}).get('threshold'))}) were chosen on the old "
            "model's scores; calibrate again"
        )
    if score_range is not None and cal.score_range:
        old = {"min": cal.score_range[0], "max": cal.score_range[1]}
        w = range_warning("the calibration", old, {"min": score_range[0], "max": score_range[1]})
        if w:
            out.append(w)
    return out
