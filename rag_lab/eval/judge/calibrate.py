"""How far an LLM judge agrees with people: human labels (:mod:`.labels`) against the judge's
scores of the same questions (an evaluation report's ragas values), metric by metric.

Per metric, over the matched (label, judge score) pairs — one per label, so a question labelled
by two people gives two pairs:

* ``cohen_kappa``: Cohen's κ between the human grade and the judge's score *binned* onto the same
  scale (:func:`~.agreement.bin_score`: equal-width bins, binary = score >= 0.5); graded scales
  (``levels`` > 2) also get ``weighted_kappa_linear`` and ``weighted_kappa_quadratic``;
* ``krippendorff_alpha``: α on the label scale (nominal when binary, ordinal when graded), and
  ``krippendorff_alpha_interval``: α between the judge's raw score and the normalised grade
  (``label / (levels - 1)``), interval (each pair one unit, judge and person its two raters);
* ``spearman``: ρ between the raw score and the grade; ``mean_bias``: mean of raw score minus
  normalised grade (positive: the judge is more lenient than people);
* ``confusion``: counts, rows the human grade, columns the judge's binned grade.

A figure is ``{"value": x}``, or ``{"value": null, "undefined": "why"}`` (all labels equal, too
few pairs): never a silent NaN. Labels whose question has no judge score in the report are listed
under ``unmatched``, those the judge could not score (NaN) under ``judge_nan``; neither is a pair.

The result (:data:`KIND`, format :data:`FORMAT`) carries the judge model, the hash of the ragas
prompts it was given (:func:`rag_lab.eval.ragas_adapter.prompt_hash`) and the labels file's
digest; ``rag-lab judge calibrate --attach BASELINE.json`` stores it as the baseline's
``meta.judge_calibration``, checked by :func:`calibration_problems` whenever the report is read.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.eval.judge.agreement import (
    AgreementUndefined,
    bin_score,
    cohen_kappa,
    confusion,
    krippendorff_alpha,
    mean_bias,
    spearman,
)
from rag_lab.eval.judge.labels import HumanLabel, LabelsError

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.report import EvalReport

__all__ = ["FORMAT", "KIND", "calibrate", "calibration_problems", "calibration_table", "report_scores"]

KIND = "rag_lab.judge_calibration"
FORMAT = 1
BINNING = "equal-width bins: grade = min(levels - 1, floor(score * levels)); binary: score >= 0.5 is 1"
_FIGURES = (
    "cohen_kappa",
    "weighted_kappa_linear",
    "weighted_kappa_quadratic",
    "krippendorff_alpha",
    "krippendorff_alpha_interval",
    "spearman",
    "mean_bias",
)
_RANGES = {"mean_bias": (-1.0, 1.0)}  # the others lie in [-1, 1] too, α may fall below -1


Scores = dict[tuple[str, str], dict[str, float]]  # (suite, qid) -> metric -> judge score


def report_scores(report: EvalReport) -> Scores:
    """``{(suite, qid): {metric: score}}`` of every ragas value of an evaluation report."""
    out: Scores = {}
    for s in report.suites:
        rg = s.ragas
        if rg is None:
            continue
        for m in rg.metrics:
            for q, v in zip(rg.qids, rg.values[m]):
                out.setdefault((s.name, q), {})[m] = float(v)
    return out


def _figure(fn: Callable[[], float]) -> dict[str, object]:
    try:
        v = fn()
    except AgreementUndefined as exc:
        return {"value": None, "undefined": str(exc)}
    return {"value": v}


def _match(
    labels: Sequence[HumanLabel], scores: Scores
) -> tuple[list[tuple[HumanLabel, float]], list[HumanLabel], list[HumanLabel]]:
    by_qid: dict[str, list[str]] = {}
    for suite, qid in scores:
        by_qid.setdefault(qid, []).append(suite)
    pairs: list[tuple[HumanLabel, float]] = []
    unmatched: list[HumanLabel] = []
    nan: list[HumanLabel] = []
    for lab in labels:
        suites = [lab.suite] if lab.suite else by_qid.get(lab.qid, [])
        if len(suites) > 1:
            raise LabelsError(
                f"line {lab.line}: question {lab.qid!r} is in suites {', '.join(sorted(suites))}: "
                "give its 'suite' in the labels file"
            )
        score = scores.get((suites[0], lab.qid), {}).get(lab.metric) if suites else None
        if score is None:
            unmatched.append(lab)
        elif not math.isfinite(score):
            nan.append(lab)
        else:
            pairs.append((lab, score))
    return pairs, unmatched, nan


def _metric_block(metric: str, pairs: list[tuple[HumanLabel, float]], levels: int) -> dict[str, object]:
    human = [lab.label for lab, _ in pairs]
    judge = [s for _, s in pairs]
    binned = [bin_score(s, levels) for s in judge]
    norm = [lab.normalised for lab, _ in pairs]
    labellers: dict[str, int] = {}
    for lab, _ in pairs:
        labellers[lab.labeller] = labellers.get(lab.labeller, 0) + 1
    block: dict[str, object] = {
        "n": len(pairs),
        "levels": levels,
        "labellers": dict(sorted(labellers.items())),
        "alpha_level": "nominal" if levels == 2 else "ordinal",
        "cohen_kappa": _figure(lambda: cohen_kappa(human, binned, levels)),
        "krippendorff_alpha": _figure(
            lambda: krippendorff_alpha([human, binned], "nominal" if levels == 2 else "ordinal")
        ),
        "krippendorff_alpha_interval": _figure(lambda: krippendorff_alpha([norm, judge], "interval")),
        "spearman": _figure(lambda: spearman(judge, human)),
        "mean_bias": _figure(lambda: mean_bias(judge, norm)),
        "confusion": confusion(human, binned, levels),
    }
    if levels > 2:
        block["weighted_kappa_linear"] = _figure(lambda: cohen_kappa(human, binned, levels, "linear"))
        block["weighted_kappa_quadratic"] = _figure(lambda: cohen_kappa(human, binned, levels, "quadratic"))
    return block


def calibrate(
    labels: Sequence[HumanLabel],
    scores: Scores,
    judge: Mapping[str, Any],
    source: str,
    labels_file: str = "",
    labels_sha256: str = "",
) -> dict[str, object]:
    """The calibration result (see the module docstring) of ``labels`` against ``scores``.
    ``judge``: ``{"model", "base_url", "prompt_hash": {metric: hash}}`` as far as known."""
    pairs, unmatched, nan = _match(labels, scores)
    metrics: dict[str, object] = {}
    for metric in dict.fromkeys(lab.metric for lab in labels):
        mine = [(lab, s) for lab, s in pairs if lab.metric == metric]
        levels = next(lab.levels for lab in labels if lab.metric == metric)
        block = _metric_block(metric, mine, levels)
        block["unmatched"] = [lab.qid for lab in unmatched if lab.metric == metric]
        block["judge_nan"] = [lab.qid for lab in nan if lab.metric == metric]
        metrics[metric] = block
    return {
        "kind": KIND,
        "format": FORMAT,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "source": source,
        "labels_file": labels_file,
        "labels_sha256": labels_sha256,
        "judge": {
            "model": str(judge.get("model") or "unknown"),
            "base_url": str(judge.get("base_url") or ""),
            "prompt_hash": {str(k): str(v) for k, v in dict(judge.get("prompt_hash") or {}).items()},
        },
        "binning": BINNING,
        "metrics": metrics,
    }


def _fig_text(fig: Mapping[str, object] | None) -> str:
    if fig is None:
        return "-"
    return f"{fig['value']:+.3f}" if fig.get("value") is not None else "undefined"


def calibration_table(result: Mapping[str, Any]) -> str:
    """A fixed-width table of the figures per metric, the undefined ones explained, the confusion
    tables and what could not be paired."""
    cols = ("metric", "n", "levels", "κ", "κ lin", "κ quad", "α", "α interval", "spearman", "bias")
    rows = [cols]
    notes: list[str] = []
    for m, b in result["metrics"].items():
        rows.append(
            (
                m,
                str(b["n"]),
                str(b["levels"]),
                *(_fig_text(b.get(f)) for f in _FIGURES),
            )
        )
        for f in _FIGURES:
            why = (b.get(f) or {}).get("undefined")
            if why:
                notes.append(f"  {m} {f}: undefined: {why}")
        if b["unmatched"]:
            notes.append(f"  {m}: {len(b['unmatched'])} label(s) without a judge score (e.g. {b['unmatched'][0]})")
        if b["judge_nan"]:
            notes.append(f"  {m}: {len(b['judge_nan'])} label(s) the judge could not score (NaN)")
        head = "  ".join(f"judge={j}" for j in range(b["levels"]))
        notes.append(f"  {m} confusion (rows: human grade; columns: judge grade): {head}")
        notes += [f"    human={i}: " + "  ".join(f"{v:>7}" for v in row) for i, row in enumerate(b["confusion"])]
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    j = result["judge"]
    hashes = ", ".join(f"{k} {v}" for k, v in j["prompt_hash"].items()) or "unknown"
    lines.insert(0, f"judge {j['model']} (prompts: {hashes}); {result['binning']}")
    return "\n".join(lines + notes)


def _num_ok(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def calibration_problems(block: object, where: str = "meta.judge_calibration") -> list[str]:
    """Every way ``block`` breaks the calibration format (empty: it is well formed)."""
    if not isinstance(block, Mapping):
        return [f"{where}: is a {type(block).__name__}, not an object"]
    out: list[str] = []
    if block.get("kind") != KIND or block.get("format") != FORMAT:
        out.append(f"{where}: kind/format {block.get('kind')!r}/{block.get('format')!r}, expected {KIND!r}/{FORMAT}")
    judge = block.get("judge")
    if not isinstance(judge, Mapping) or not isinstance(judge.get("model"), str):
        out.append(f"{where}.judge: needs a 'model' string")
    metrics = block.get("metrics")
    if not isinstance(metrics, Mapping) or not metrics:
        return out + [f"{where}.metrics: missing or empty"]
    for m, b in metrics.items():
        w = f"{where}.metrics.{m}"
        if not isinstance(b, Mapping):
            out.append(f"{w}: not an object")
            continue
        n, levels = b.get("n"), b.get("levels")
        if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
            out.append(f"{w}.n: {n!r} is not a count")
        if not (isinstance(levels, int) and not isinstance(levels, bool) and levels >= 2):
            out.append(f"{w}.levels: {levels!r} is not an integer >= 2")
            continue
        for f in _FIGURES:
            fig = b.get(f)
            if fig is None and f.startswith("weighted") and levels == 2:
                continue
            if not isinstance(fig, Mapping) or "value" not in fig:
                out.append(f"{w}.{f}: missing {{'value': …}}")
                continue
            v = fig["value"]
            lo, hi = _RANGES.get(f, (-math.inf if f.startswith("krippendorff") else -1.0, 1.0))
            if v is None:
                if not isinstance(fig.get("undefined"), str):
                    out.append(f"{w}.{f}: null without the 'undefined' reason")
            elif not (_num_ok(v) and lo - 1e-9 <= v <= hi + 1e-9):
                out.append(f"{w}.{f}: {v!r} is not a number in [{lo:g}, {hi:g}]")
        table = b.get("confusion")
        if not (
            isinstance(table, list)
            and len(table) == levels
            and all(isinstance(r, list) and len(r) == levels and all(isinstance(x, int) for x in r) for r in table)
        ):
            out.append(f"{w}.confusion: not a {levels}×{levels} table of counts")
        elif isinstance(n, int) and sum(map(sum, table)) != n:
            out.append(f"{w}.confusion: its counts sum to {sum(map(sum, table))}, not n = {n}")
    return out
