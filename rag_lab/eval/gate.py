"""Regression gate: compare a current evaluation with a committed baseline, metric by metric and
question by question.

**Metric checks.** For each suite (dataset slice) and gated metric, the queries present in both
reports are paired and ``d_q = current_q - baseline_q`` computed (samples NaN on either side are
left out of the pair and counted). A metric **regresses** when both hold:

* the mean difference is below ``-tolerance`` (default 0.02, absolute; per-metric overrides), and
* a one-sided paired test over queries says the drop is unlikely to be chance: ``p < alpha``
  (default 0.05). The test is a sign-flip permutation test of the mean difference (exact over
  all 2^n sign vectors up to n = 16, else ``n_resamples`` random flips from ``seed``), or a
  paired bootstrap of the mean difference. Both are deterministic for a fixed seed.

Each check also carries the percentile bootstrap confidence interval of the mean difference
(``ci_level``, default 95 %), the effect size (Cohen's d_z: mean difference / SD of the
differences) and what the slice can detect: ``min_queries`` (the fewest questions that must all
get worse, the others unchanged, for the test to reach ``p < alpha``) and ``mde`` (minimum
detectable effect: the mean drop a paired test at ``alpha`` detects with 80 % power when the
per-question changes are as variable as the metric is across the baseline's questions,
``(z_{1-alpha} + z_{0.8}) * SD_baseline / sqrt(n)``, and never below the tolerance).

It **fails** as well, whatever the difference, when the current mean is NaN, when the current run
has more NaN / failed samples than the baseline had (NaN is a failure, never averaged away), when
a suite has more pipeline / model errors than in the baseline, or when a gated suite, metric or
query of the baseline is missing from the current run. A metric that rose by more than the
tolerance with ``p < alpha`` is reported ``improved`` (passes; refresh the baseline to lock it in).

**Gated metrics** (unless ``GatePolicy.metrics`` names them): those of
:data:`DEFAULT_GATE_METRICS` present in the baseline, one name per quantity (``id_context_recall``
and ``nonllm_context_recall`` equal ``recall@10`` on these pipelines and are reported, not gated),
and only where the baseline mean lies inside ``headroom`` (default (0.05, 0.95)): a metric at
the floor cannot fail and one at the ceiling can never show an improvement, so they are listed
under ``not_gated`` with the reason instead (their per-question changes are still listed).

**Per-question changes.** The baseline stores each question's ranked document ids, final context
chunk ids and answer. Every question whose ranking, contexts or answer differ (or whose metric
values do) is listed, worst first (by its largest drop on a gated metric, then the sum of drops).
The offline pipeline is deterministic, so any such change is a real behaviour change: ``fail_on_change=True``
(``--fail-on-change``) fails the gate on any of them, for deterministic setups; the statistical
test above is the policy for noisy ones (an LLM in the loop).

:func:`run_gate` re-runs the baseline's own spec (suites, ks, ragas metrics, params) with the
offline defaults in a fresh workspace, unless a current report is given. Exit codes of the CLI:
0 pass, 1 regression / NaN / missing / errors / changes under ``--fail-on-change``, 2 unusable
input. :meth:`GateResult.to_json` (``gate.json``) holds the verdict for other tools.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree as ET

import numpy as np

from rag_lab.eval.report import CSS, SORT_SCRIPT, EvalReport, ReportError, SuiteResult, load_report, md_cell, short_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

__all__ = [
    "DEFAULT_GATE_METRICS",
    "METRIC_FAMILIES",
    "GateError",
    "GatePolicy",
    "GateResult",
    "MetricCheck",
    "QueryChange",
    "bootstrap_ci",
    "changed_params",
    "compare_reports",
    "detectable_effect",
    "min_queries_to_detect",
    "paired_bootstrap_pvalue",
    "paired_permutation_pvalue",
    "query_changes",
    "run_gate",
]

#: metric family of every gateable metric (one name per quantity: no aliases)
METRIC_FAMILIES: dict[str, str] = {
    "ndcg@10": "retrieval",
    "recall@5": "retrieval",
    "recall@10": "retrieval",
    "precision@5": "retrieval",
    "hit@1": "retrieval",
    "mrr": "retrieval",
    "map": "retrieval",
    "id_context_precision": "ragas retrieval",
    "nonllm_context_precision": "ragas retrieval",
    "string_similarity": "answer similarity",
    "bleu": "answer similarity",
    "rouge_l": "answer similarity",
    "chrf": "answer similarity",
    "bleu_zh": "answer similarity",
    "rouge_l_zh": "answer similarity",
    "faithfulness": "LLM judge",
    "answer_relevancy": "LLM judge",
    "llm_context_precision": "LLM judge",
}
#: Metrics gated by default (those present in the baseline with headroom); others are shown but not gated.
DEFAULT_GATE_METRICS: tuple[str, ...] = tuple(METRIC_FAMILIES)
EXACT_PERMUTATION_MAX_N = 16
ERRORS_METRIC = "model_errors"  # the per-suite check on pipeline / model errors


class GateError(ValueError):
    """The baseline or current report cannot be compared (exit code 2)."""


# --------------------------------------------------------------------------- paired tests


def _diffs(diffs: Sequence[float]) -> np.ndarray:
    d = np.asarray(list(diffs), dtype=np.float64)
    if d.ndim != 1 or not np.all(np.isfinite(d)):
        raise ValueError("paired differences must be a finite 1-D sequence")
    return d


def paired_permutation_pvalue(diffs: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """One-sided p-value of ``mean(diffs) < 0`` under sign symmetry (sign-flip permutation test).

    ``p = P(mean of randomly signed diffs <= observed mean)``; exact enumeration for n <= 16,
    else ``(1 + hits) / (1 + n_resamples)`` with a ``numpy`` generator seeded by ``seed``.
    Returns 1.0 for no pairs.
    """
    d = _diffs(diffs)
    n = d.size
    if n == 0:
        return 1.0
    observed = d.mean()
    eps = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = signs @ np.abs(d) / n
        return float(np.mean(means <= observed + eps))
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < n_resamples:
        b = min(2000, n_resamples - done)
        signs = rng.choice((-1.0, 1.0), size=(b, n))
        hits += int(np.sum(signs @ np.abs(d) / n <= observed + eps))
        done += b
    return (1 + hits) / (1 + n_resamples)


def _bootstrap_means(d: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    done = 0
    while done < n_resamples:
        b = min(2000, n_resamples - done)
        out[done : done + b] = d[rng.integers(0, d.size, size=(b, d.size))].mean(axis=1)
        done += b
    return out


def paired_bootstrap_pvalue(diffs: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """One-sided bootstrap p-value of ``mean(diffs) < 0``: the share of resampled means (queries
    drawn with replacement) that are ``>= 0``, with the +1 correction. 1.0 for no pairs or all 0."""
    d = _diffs(diffs)
    if d.size == 0 or not np.any(d):
        return 1.0
    hits = int(np.sum(_bootstrap_means(d, n_resamples, seed) >= 0))
    return (1 + hits) / (1 + n_resamples)


def bootstrap_ci(
    diffs: Sequence[float], level: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``mean(diffs)`` (queries resampled with
    replacement). ``(0, 0)`` when every difference is 0, ``(nan, nan)`` for no pairs."""
    d = _diffs(diffs)
    if d.size == 0:
        return (math.nan, math.nan)
    if not np.any(d):
        return (0.0, 0.0)
    means = _bootstrap_means(d, n_resamples, seed)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


def effect_size(diffs: Sequence[float]) -> float:
    """Cohen's d_z of paired differences: mean / SD (ddof 1). 0 when nothing changed; NaN when
    fewer than two pairs or every difference is the same non-zero value (SD 0)."""
    d = _diffs(diffs)
    if d.size and not np.any(d):
        return 0.0
    if d.size < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    return float(d.mean() / sd) if sd > 0 else math.nan


def min_queries_to_detect(n: int, alpha: float = 0.05, test: str = "permutation") -> int | None:
    """The fewest of ``n`` questions that must all get worse (by the same amount, the others
    unchanged) for the one-sided test to give ``p < alpha``; None when even all ``n`` are not enough.

    Permutation: the ``k`` drops are the only non-zero differences, so ``p = 2^-k``. Bootstrap:
    a resample has mean >= 0 only when it draws none of them, ``p ≈ (1 - k/n)^n``.
    """
    for k in range(1, n + 1):
        p = 2.0**-k if test == "permutation" else (1 - k / n) ** n
        if p < alpha:
            return k
    return None


def detectable_effect(baseline_values: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable mean drop (normal approximation of a one-sided paired test) when the
    per-question changes are as variable as the metric across the baseline's questions:
    ``(z_{1-alpha} + z_power) * SD / sqrt(n)``. NaN for fewer than two valid values."""
    v = np.asarray([x for x in baseline_values if math.isfinite(x)], dtype=np.float64)
    if v.size < 2:
        return math.nan
    z = NormalDist()
    return float((z.inv_cdf(1 - alpha) + z.inv_cdf(power)) * v.std(ddof=1) / math.sqrt(v.size))


# --------------------------------------------------------------------------- policy and result


@dataclass
class GatePolicy:
    metrics: Sequence[str] | None = None  # None: DEFAULT_GATE_METRICS present in the baseline, with headroom
    tolerance: float = 0.02
    tolerances: dict[str, float] = field(default_factory=dict)
    alpha: float = 0.05
    test: str = "permutation"  # "permutation" | "bootstrap"
    n_resamples: int = 10_000
    seed: int = 0
    fail_on_change: bool = False  # deterministic setups: any changed question fails the gate
    ci_level: float = 0.95
    #: default-gated metrics need a baseline mean strictly inside (lo, hi): room to fall and to rise
    headroom: tuple[float, float] = (0.05, 0.95)

    def __post_init__(self) -> None:
        if self.test not in ("permutation", "bootstrap"):
            raise GateError(f"test={self.test!r}: use 'permutation' or 'bootstrap'")
        if not 0 < self.alpha < 1:
            raise GateError(f"alpha={self.alpha!r} must be in (0, 1)")
        lo, hi = self.headroom
        if not 0 <= lo < hi <= 1:
            raise GateError(f"headroom={self.headroom!r} must satisfy 0 <= lo < hi <= 1")
        if not 0 < self.ci_level < 1:
            raise GateError(f"ci_level={self.ci_level!r} must be in (0, 1)")
        for name, tol in {"tolerance": self.tolerance, **self.tolerances}.items():
            if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
                raise GateError(f"tolerance for {name} = {tol!r} must be a number >= 0")

    def tolerance_for(self, metric: str) -> float:
        return float(self.tolerances.get(metric, self.tolerance))

    def pvalue(self, diffs: Sequence[float]) -> float:
        fn = paired_permutation_pvalue if self.test == "permutation" else paired_bootstrap_pvalue
        return fn(diffs, self.n_resamples, self.seed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics) if self.metrics is not None else None,
            "tolerance": self.tolerance,
            "tolerances": dict(self.tolerances),
            "alpha": self.alpha,
            "test": self.test,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "fail_on_change": self.fail_on_change,
            "ci_level": self.ci_level,
            "headroom": list(self.headroom),
        }


@dataclass
class MetricCheck:
    suite: str
    metric: str
    baseline: float
    current: float
    delta: float
    tolerance: float
    p_value: float
    n_pairs: int
    bad_baseline: int  # NaN / failed samples
    bad_current: int
    status: str  # "ok" | "improved" | "regression" | "nan" | "missing" | "errors"
    note: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan
    effect_size: float = math.nan
    mde: float = math.nan
    min_queries: int | None = None
    n_worse: int = 0
    n_better: int = 0

    @property
    def failed(self) -> bool:
        return self.status in ("regression", "nan", "missing", "errors")

    @property
    def family(self) -> str:
        return "errors" if self.metric == ERRORS_METRIC else METRIC_FAMILIES.get(self.metric, "other")

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "metric": self.metric,
            "family": self.family,
            "baseline": _num(self.baseline),
            "current": _num(self.current),
            "delta": _num(self.delta),
            "ci": [_num(self.ci_low), _num(self.ci_high)],
            "p": _num(self.p_value),
            "effect_size": _num(self.effect_size),
            "tolerance": self.tolerance,
            "mde": _num(self.mde),
            "min_queries": self.min_queries,
            "n_pairs": self.n_pairs,
            "n_worse": self.n_worse,
            "n_better": self.n_better,
            "nan_baseline": self.bad_baseline,
            "nan_current": self.bad_current,
            "status": self.status,
            "failed": self.failed,
            "note": self.note,
        }


@dataclass
class QueryChange:
    """One question whose behaviour differs from the baseline."""

    suite: str
    qid: str
    question: str
    changed: list[str]  # of "ranking", "contexts", "answer", "metrics"
    deltas: dict[str, float]  # gated metric -> current - baseline (non-zero only)
    baseline_ids: list[str] = field(default_factory=list)
    current_ids: list[str] = field(default_factory=list)
    baseline_answer: str = ""
    current_answer: str = ""
    gold_ids: list[str] = field(default_factory=list)

    @property
    def worst(self) -> float:
        """The largest drop on a gated metric (negative), else 0 (or the smallest rise)."""
        return min(self.deltas.values()) if self.deltas else 0.0

    def describe(self) -> str:
        parts = []
        if "ranking" in self.changed:
            parts.append(f"ranking {_ids(self.baseline_ids)} → {_ids(self.current_ids)}")
        if "contexts" in self.changed:
            parts.append("final contexts")
        if "answer" in self.changed:
            parts.append("answer")
        drops = ", ".join(f"{m} {d:+.3f}" for m, d in sorted(self.deltas.items(), key=lambda kv: kv[1]))
        return "; ".join(parts) + (f" ({drops})" if drops else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "qid": self.qid,
            "question": self.question,
            "changed": list(self.changed),
            "worst": self.worst,
            "deltas": dict(self.deltas),
            "gold_ids": list(self.gold_ids),
            "baseline_ids": list(self.baseline_ids),
            "current_ids": list(self.current_ids),
            "baseline_answer": self.baseline_answer,
            "current_answer": self.current_answer,
        }


def _ids(ids: Sequence[str], n: int = 3) -> str:
    head = ", ".join(ids[:n])
    return f"[{head}{', …' if len(ids) > n else ''}]"


def _num(v: Any) -> Any:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


@dataclass
class GateResult:
    checks: list[MetricCheck]
    policy: GatePolicy
    current: EvalReport | None = None
    changes: list[QueryChange] = field(default_factory=list)
    #: suite -> {param: [baseline value, current value]} (effective params that differ)
    params_changed: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: suite -> {metric: reason} for default metrics present but not gated
    not_gated: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks) and not (self.policy.fail_on_change and self.changes)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def failures(self) -> list[MetricCheck]:
        return [c for c in self.checks if c.failed]

    def verdict(self) -> str:
        bad = self.failures()
        n_changed = len(self.changes)
        if not bad and not (self.policy.fail_on_change and self.changes):
            return (
                f"GATE PASSED: {len(self.checks)} checks, test={self.policy.test}, alpha={self.policy.alpha}; "
                f"{n_changed} questions changed"
            )
        why = [f"{c.suite}/{c.metric} {c.status}" for c in bad]
        if self.policy.fail_on_change and self.changes:
            why.append(f"{n_changed} questions changed (--fail-on-change)")
        return f"GATE FAILED: {len(bad)} of {len(self.checks)} checks failed ({', '.join(why)})"

    def table(self, max_changes: int = 10) -> str:
        """A fixed-width table of every check, the changed params, the worst changed questions,
        then a one-line verdict."""
        lvl = f"{round(self.policy.ci_level * 100):d}% CI"
        head = ("suite", "metric", "baseline", "current", "delta", lvl, "tol", "p", "mde", "pairs", "NaN b/c", "status")
        rows = [head]
        for c in self.checks:
            rows.append(
                (
                    c.suite,
                    c.metric,
                    _f(c.baseline),
                    _f(c.current),
                    _f(c.delta, signed=True),
                    _ci(c),
                    _f(c.tolerance),
                    _f(c.p_value),
                    _f(c.mde),
                    str(c.n_pairs),
                    f"{c.bad_baseline}/{c.bad_current}",
                    c.status.upper() if c.failed else c.status,
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        for c in self.checks:
            if c.note:
                lines.append(f"  {c.suite} {c.metric}: {c.note}")
        for suite, skipped in self.not_gated.items():
            if skipped:
                lines.append(f"  {suite}: not gated: " + "; ".join(f"{m} ({why})" for m, why in skipped.items()))
        lines.append(self.params_line())
        if self.changes:
            lines.append(f"per-question changes: {len(self.changes)} (worst first)")
            for ch in self.changes[:max_changes]:
                lines.append(f"  {ch.suite}/{ch.qid} {short_text(ch.question, 60)!r}: {ch.describe()}")
            if len(self.changes) > max_changes:
                lines.append(f"  … {len(self.changes) - max_changes} more in gate.md / gate.json")
        else:
            lines.append("per-question changes: none (every ranking, context list and answer is the same)")
        return "\n".join(lines + [self.verdict()])

    def params_line(self) -> str:
        if not self.params_changed:
            return "params: unchanged from the baseline"
        merged: dict[str, list[Any]] = {}
        for per in self.params_changed.values():
            merged.update(per)
        return "params changed: " + ", ".join(f"{k} {b!r} → {c!r}" for k, (b, c) in sorted(merged.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "rag_lab.gate",
            "passed": self.passed,
            "exit_code": self.exit_code,
            "verdict": self.verdict(),
            "policy": self.policy.to_dict(),
            "checks": [c.to_dict() for c in self.checks],
            "params_changed": self.params_changed,
            "not_gated": self.not_gated,
            "query_changes": [ch.to_dict() for ch in self.changes],
        }

    def html(self) -> str:
        return _gate_html(self)

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """``gate.json``, ``gate.md``, ``gate.html`` and ``gate.junit.xml`` under ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "json": out / "gate.json",
            "md": out / "gate.md",
            "html": out / "gate.html",
            "junit": out / "gate.junit.xml",
        }
        paths["json"].write_text(self.to_json(), encoding="utf-8")
        paths["md"].write_text(self.markdown(), encoding="utf-8")
        paths["html"].write_text(self.html(), encoding="utf-8")
        paths["junit"].write_text(self.junit(), encoding="utf-8")
        return paths

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    def junit(self) -> str:
        root = ET.Element(
            "testsuites", name="rag_lab.gate", tests=str(len(self.checks)), failures=str(len(self.failures()))
        )
        by_suite: dict[str, list[MetricCheck]] = {}
        for c in self.checks:
            by_suite.setdefault(c.suite, []).append(c)
        for suite, checks in by_suite.items():
            ts = ET.SubElement(
                root,
                "testsuite",
                name=f"gate.{suite}",
                tests=str(len(checks)),
                failures=str(sum(c.failed for c in checks)),
                errors="0",
            )
            for c in checks:
                tc = ET.SubElement(ts, "testcase", classname=f"rag_lab.gate.{suite}", name=c.metric)
                ET.SubElement(tc, "system-out").text = (
                    f"baseline={_f(c.baseline)} current={_f(c.current)} delta={_f(c.delta, True)} ci={_ci(c)} "
                    f"tol={_f(c.tolerance)} p={_f(c.p_value)} pairs={c.n_pairs} status={c.status}"
                )
                if c.failed:
                    ET.SubElement(tc, "failure", message=f"{c.metric} {c.status}: {c.note or _f(c.delta, True)}")
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

    def markdown(self, max_changes: int = 200) -> str:
        lvl = f"{round(self.policy.ci_level * 100):d}% CI"
        lines = [
            "# Regression gate",
            "",
            self.verdict(),
            "",
            self.params_line(),
            "",
            f"| suite | metric | family | baseline | current | delta | {lvl} | tol | p | d_z | mde | pairs | worse/better "
            "| NaN b/c | status |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in self.checks:
            lines.append(
                f"| {c.suite} | {c.metric} | {c.family} | {_f(c.baseline)} | {_f(c.current)} | {_f(c.delta, True)} | "
                f"{_ci(c)} | {_f(c.tolerance)} | {_f(c.p_value)} | {_f(c.effect_size, True)} | {_f(c.mde)} | "
                f"{c.n_pairs} | {c.n_worse}/{c.n_better} | {c.bad_baseline}/{c.bad_current} | "
                f"{'**' + c.status + '**' if c.failed else c.status} |"
            )
        notes = [f"- {c.suite} {c.metric}: {c.note}" for c in self.checks if c.note]
        notes += [f"- {suite}: not gated: {m} ({why})" for suite, sk in self.not_gated.items() for m, why in sk.items()]
        if notes:
            lines += ["", *notes]
        lines += ["", f"## Per-question changes ({len(self.changes)}, worst first)", ""]
        if not self.changes:
            lines.append("None: every question's ranking, final contexts and answer equal the baseline's.")
        else:
            lines += ["| suite | qid | question | what changed | worst delta |", "|---|---|---|---|---|"]
            for ch in self.changes[:max_changes]:
                lines.append(
                    f"| {ch.suite} | {ch.qid} | {md_cell(short_text(ch.question, 120))} | {md_cell(ch.describe())} | "
                    f"{_f(ch.worst, True)} |"
                )
            if len(self.changes) > max_changes:
                lines.append(f"\n… {len(self.changes) - max_changes} more in gate.json")
        lines.append("")
        return "\n".join(lines)


def _gate_html(res: GateResult, max_changes: int = 500) -> str:
    """gate.html: verdict, changed params, every check with its CI (sortable), per-question changes
    worst first with question, what changed, the rankings and both answers (sortable)."""
    import html as _html

    e = _html.escape
    lvl = f"{round(res.policy.ci_level * 100):d}% CI"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>rag_lab regression gate</title>",
        f"<style>{CSS}</style></head><body><h1>Regression gate</h1>",
        f"<p class='{'' if res.passed else 'bad'}'><b>{e(res.verdict())}</b></p>",
        f"<p>{e(res.params_line())}</p>",
        "<table class='sortable'><thead><tr><th>suite</th><th>metric</th><th>family</th><th>baseline</th>"
        f"<th>current</th><th>delta</th><th>{lvl}</th><th>p</th><th>d_z</th><th>mde</th><th>min questions</th>"
        "<th>pairs</th><th>worse</th><th>better</th><th>status</th><th>note</th></tr></thead><tbody>",
    ]

    def td(v: Any, signed: bool = False) -> str:
        ok = isinstance(v, (int, float)) and math.isfinite(v)
        return f"<td data-v='{float(v) if ok else 'NaN'}'>{_f(v, signed) if ok else '-'}</td>"

    for c in res.checks:
        cls = " class='bad'" if c.failed else ""
        parts.append(
            f"<tr{cls}><td>{e(c.suite)}</td><td>{e(c.metric)}</td><td>{e(c.family)}</td>{td(c.baseline)}"
            f"{td(c.current)}{td(c.delta, True)}<td>{e(_ci(c))}</td>{td(c.p_value)}{td(c.effect_size, True)}"
            f"{td(c.mde)}<td>{c.min_queries if c.min_queries is not None else '-'}</td><td>{c.n_pairs}</td>"
            f"<td>{c.n_worse}</td><td>{c.n_better}</td><td>{e(c.status)}</td><td>{e(c.note)}</td></tr>"
        )
    parts.append("</tbody></table>")
    for suite, skipped in res.not_gated.items():
        for m, why in skipped.items():
            parts.append(f"<p>{e(suite)}: not gated: {e(m)} ({e(why)})</p>")
    parts.append(f"<h2>Per-question changes ({len(res.changes)}, worst first)</h2>")
    if not res.changes:
        parts.append("<p>None: every question's ranking, final contexts and answer equal the baseline's.</p>")
    else:
        parts.append(
            "<table class='sortable'><thead><tr><th>suite</th><th>qid</th><th>question</th><th>what changed</th>"
            "<th>worst delta</th><th>metric deltas</th><th>gold</th><th>baseline ranking</th>"
            "<th>current ranking</th><th>baseline answer</th><th>current answer</th></tr></thead><tbody>"
        )
        for ch in res.changes[:max_changes]:
            cls = " class='worse'" if ch.worst < 0 else (" class='better'" if ch.deltas else "")
            deltas = ", ".join(f"{m} {d:+.3f}" for m, d in sorted(ch.deltas.items(), key=lambda kv: kv[1]))
            parts.append(
                f"<tr{cls}><td>{e(ch.suite)}</td><td>{e(ch.qid)}</td><td>{e(ch.question)}</td>"
                f"<td>{e(', '.join(ch.changed))}</td>{td(ch.worst, True)}<td>{e(deltas)}</td>"
                f"<td>{e(', '.join(ch.gold_ids))}</td><td>{e(', '.join(ch.baseline_ids[:10]))}</td>"
                f"<td>{e(', '.join(ch.current_ids[:10]))}</td><td>{e(short_text(ch.baseline_answer, 400))}</td>"
                f"<td>{e(short_text(ch.current_answer, 400))}</td></tr>"
            )
        parts.append("</tbody></table>")
    parts.append(SORT_SCRIPT + "</body></html>")
    return "\n".join(parts) + "\n"


def _f(v: float, signed: bool = False) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "NaN" if isinstance(v, float) else "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _ci(c: MetricCheck) -> str:
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return "-"
    return f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"


# --------------------------------------------------------------------------- comparison


def _bad(values: Mapping[str, float]) -> int:
    return sum(1 for v in values.values() if not math.isfinite(v))


def _missing_check(suite: str, metric: str, baseline: float, tol: float, note: str) -> MetricCheck:
    return MetricCheck(suite, metric, baseline, math.nan, math.nan, tol, math.nan, 0, 0, 0, "missing", note)


def _check_suite(base: SuiteResult, cur: SuiteResult, metric: str, policy: GatePolicy) -> MetricCheck:
    tol = policy.tolerance_for(metric)
    bvals, cvals = base.values().get(metric), cur.values().get(metric)
    bmean = base.summary().get(metric, math.nan)
    if cvals is None or bvals is None:
        return _missing_check(base.name, metric, bmean, tol, "metric missing from the current run")
    cmean = cur.summary().get(metric, math.nan)
    bad_b, bad_c = _bad(bvals), _bad(cvals)
    missing_q = [q for q in bvals if q not in cvals]
    pairs = [(bvals[q], cvals[q]) for q in bvals if q in cvals and math.isfinite(bvals[q]) and math.isfinite(cvals[q])]
    diffs = [0.0 if abs(c - b) < 1e-9 else c - b for b, c in pairs]  # float noise is no change
    delta = float(np.mean(diffs)) if diffs else math.nan
    p = policy.pvalue(diffs) if diffs else math.nan
    lo, hi = bootstrap_ci(diffs, policy.ci_level, policy.n_resamples, policy.seed) if diffs else (math.nan, math.nan)
    check = MetricCheck(
        base.name,
        metric,
        bmean,
        cmean,
        delta,
        tol,
        p,
        len(pairs),
        bad_b,
        bad_c,
        "ok",
        ci_low=lo,
        ci_high=hi,
        effect_size=effect_size(diffs) if diffs else math.nan,
        mde=max(tol, detectable_effect(list(bvals.values()), policy.alpha)),
        min_queries=min_queries_to_detect(len(pairs), policy.alpha, policy.test),
        n_worse=sum(1 for x in diffs if x < 0),
        n_better=sum(1 for x in diffs if x > 0),
    )
    if missing_q:
        check.status, check.note = (
            "missing",
            f"{len(missing_q)} baseline queries missing from the current run (e.g. {missing_q[0]})",
        )
    elif not math.isfinite(cmean):
        check.status, check.note = "nan", "current mean is NaN (no valid sample)"
    elif bad_c > bad_b:
        check.status, check.note = (
            "nan",
            f"{bad_c - bad_b} more NaN/failed samples than the baseline ({bad_b} → {bad_c})",
        )
    elif diffs and delta < -tol and p < policy.alpha:
        check.status = "regression"
        check.note = (
            f"mean dropped by {-delta:.4f} > tolerance {tol:g} (paired {policy.test} p={p:.4g} < {policy.alpha:g}; "
            f"{check.n_worse} of {len(pairs)} questions worse)"
        )
    elif diffs and delta > tol and (p_up := policy.pvalue([-x for x in diffs])) < policy.alpha:
        check.status = "improved"
        check.note = f"mean rose by {delta:.4f} (p={p_up:.4g}); refresh the baseline to keep it"
    return check


def _errors_check(base: SuiteResult, cur: SuiteResult) -> MetricCheck:
    """Pipeline / model errors (answer stream failed or cut, a stage raised): fail when they rise."""
    b, c = base.errors, cur.errors
    check = MetricCheck(base.name, ERRORS_METRIC, float(b), float(c), float(c - b), 0.0, math.nan, 0, 0, 0, "ok")
    if c > b:
        first = next((r for r in cur.records if r.error), None)
        check.status = "errors"
        check.note = f"{c} questions with pipeline/model errors (baseline {b})" + (
            f", e.g. {first.qid}: {short_text(first.error, 120)}" if first is not None else ""
        )
    return check


def _headroom_reason(mean: float, tol: float, headroom: tuple[float, float]) -> str:
    if not math.isfinite(mean):
        return ""
    if mean <= tol:
        return f"baseline mean {mean:.4f} <= tolerance {tol:g}: it cannot drop by more than the tolerance"
    lo, hi = headroom
    if not lo < mean < hi:
        side = "cannot rise" if mean >= hi else "can barely fall"
        return f"baseline mean {mean:.4f} outside ({lo:g}, {hi:g}): no headroom, it {side}"
    return ""


def query_changes(base: SuiteResult, cur: SuiteResult, metrics: Sequence[str]) -> list[QueryChange]:
    """Every question of ``base`` whose ranked document ids, final contexts, answer or gated metric
    values differ in ``cur``, worst first (largest drop on a gated metric, then most changed)."""
    bvals, cvals = base.values(), cur.values()
    cur_recs = {r.qid: r for r in cur.records}
    out: list[QueryChange] = []
    for b in base.records:
        c = cur_recs.get(b.qid)
        if c is None:
            continue  # reported by the metric checks as missing
        changed = []
        if list(b.retrieved_doc_ids) != list(c.retrieved_doc_ids):
            changed.append("ranking")
        if b.context_ids and list(b.context_ids) != list(c.context_ids):
            changed.append("contexts")
        if b.answer != c.answer:
            changed.append("answer")
        deltas: dict[str, float] = {}
        for m in metrics:
            bv, cv = bvals.get(m, {}).get(b.qid, math.nan), cvals.get(m, {}).get(b.qid, math.nan)
            if math.isfinite(bv) and math.isfinite(cv):
                if abs(cv - bv) >= 1e-9:
                    deltas[m] = cv - bv
            elif math.isfinite(bv) and bv > 0:
                deltas[m] = -bv  # became NaN / failed: counted as a drop to 0
        if deltas and not changed:
            changed.append("metrics")
        if changed:
            out.append(
                QueryChange(
                    base.name,
                    b.qid,
                    b.question,
                    changed,
                    deltas,
                    list(b.retrieved_doc_ids),
                    list(c.retrieved_doc_ids),
                    b.answer,
                    c.answer,
                    list(b.gold_ids),
                )
            )
    out.sort(key=lambda ch: (ch.worst, sum(ch.deltas.values()), -len(ch.changed), ch.qid))
    return out


def _effective_params(report: EvalReport, suite: SuiteResult, with_lab: bool) -> dict[str, Any]:
    lab = report.meta.get("lab_params") if with_lab else None
    return {**(dict(lab) if isinstance(lab, Mapping) else {}), **dict(suite.params or {})}


def changed_params(baseline: EvalReport, current: EvalReport) -> dict[str, dict[str, list[Any]]]:
    """Per suite, the params whose effective value differs: ``{suite: {name: [baseline, current]}}``
    (the lab's params stored in ``meta.lab_params`` with the suite's overrides on top; only the
    overrides when either report has no ``meta.lab_params``)."""
    out: dict[str, dict[str, list[Any]]] = {}
    cur_by_name = {s.name: s for s in current.suites}
    with_lab = all(isinstance(r.meta.get("lab_params"), Mapping) for r in (baseline, current))
    for b in baseline.suites:
        c = cur_by_name.get(b.name)
        if c is None:
            continue
        bp, cp = _effective_params(baseline, b, with_lab), _effective_params(current, c, with_lab)
        diff = {k: [bp.get(k), cp.get(k)] for k in sorted(set(bp) | set(cp)) if bp.get(k) != cp.get(k)}
        if diff:
            out[b.name] = diff
    return out


def compare_reports(baseline: EvalReport, current: EvalReport, policy: GatePolicy | None = None) -> GateResult:
    """Check every gated metric of every baseline suite against the current report, and list the
    questions that changed."""
    pol = policy or GatePolicy()
    checks: list[MetricCheck] = []
    changes: list[QueryChange] = []
    not_gated: dict[str, dict[str, str]] = {}
    cur_by_name = {s.name: s for s in current.suites}
    for base in baseline.suites:
        cur = cur_by_name.get(base.name)
        names = base.metric_names()
        if pol.metrics is not None:
            gated = list(pol.metrics)
            for m in gated:
                if m not in names:
                    raise GateError(
                        f"gated metric {m!r} is not in the baseline suite {base.name!r} (it has: {', '.join(names)})"
                    )
        else:
            summary = base.summary()
            gated, skipped = [], {}
            for m in DEFAULT_GATE_METRICS:
                if m not in names:
                    continue
                why = _headroom_reason(summary.get(m, math.nan), pol.tolerance_for(m), pol.headroom)
                if why:
                    skipped[m] = why
                else:
                    gated.append(m)
            if skipped:
                not_gated[base.name] = skipped
        if cur is None:
            checks += [
                _missing_check(
                    base.name,
                    m,
                    base.summary().get(m, math.nan),
                    pol.tolerance_for(m),
                    "suite missing from the current run",
                )
                for m in gated
            ]
            continue
        checks += [_check_suite(base, cur, m, pol) for m in gated]
        checks.append(_errors_check(base, cur))
        changes += query_changes(base, cur, gated)
    if not checks:
        raise GateError("nothing to gate: the baseline has no suites / gated metrics")
    changes.sort(key=lambda ch: (ch.worst, sum(ch.deltas.values()), -len(ch.changed), ch.suite, ch.qid))
    return GateResult(checks, pol, current, changes, changed_params(baseline, current), not_gated)


# --------------------------------------------------------------------------- running


def baseline_spec(baseline: EvalReport) -> dict[str, Any]:
    spec = baseline.meta.get("spec")
    if not isinstance(spec, Mapping) or not spec.get("suites"):
        raise GateError("the baseline has no meta.spec.suites: it was not written by rag-lab (cannot re-run it)")
    return dict(spec)


def evaluate_spec(
    spec: Mapping[str, Any],
    *,
    params: Mapping[str, Any] | None = None,
    config: str | Path | Mapping[str, Any] | None = None,
    workspace: str | Path | None = None,
    lab_factory: Callable[[Path], Lab] | None = None,
    progress: bool = False,
    judge: Any = None,
) -> EvalReport:
    """Run a report spec (suites, ks, ragas metrics, params) in a fresh lab and return the report.

    ``params`` are applied on top of the spec's params. ``lab_factory(workspace_path)`` builds the
    lab (default: ``Lab.from_config(config, workspace=...)``, the offline defaults).
    """
    from rag_lab.asyncutil import run_sync
    from rag_lab.eval.runner import SuiteSpec, evaluate_suites
    from rag_lab.lab.lab import Lab

    suites = [SuiteSpec.from_dict(s) for s in spec["suites"]]
    merged = {**dict(spec.get("params") or {}), **dict(params or {})}
    ks = tuple(spec.get("ks") or (1, 3, 5, 10))
    ragas_metrics = list(spec.get("ragas_metrics") or [])

    def run(ws: Path) -> EvalReport:
        lab = lab_factory(ws) if lab_factory else Lab.from_config(config, workspace=ws)
        try:
            return run_sync(
                lambda: evaluate_suites(
                    lab,
                    suites,
                    params=merged or None,
                    ragas_metrics=ragas_metrics,
                    judge=judge,
                    ks=ks,
                    progress=progress,
                    meta={"config": str(config) if isinstance(config, (str, Path)) else None},
                )
            )
        finally:
            if lab_factory is None:  # a lab from the factory belongs to the caller
                lab.workspace.close()

    if workspace is not None:
        return run(Path(workspace))
    with tempfile.TemporaryDirectory(prefix="rag_lab_gate_") as tmp:
        return run(Path(tmp))


def run_gate(
    baseline: str | Path | EvalReport,
    current: str | Path | EvalReport | None = None,
    policy: GatePolicy | None = None,
    **evaluate_kwargs: Any,
) -> GateResult:
    """Load the baseline, get the current report (given, or by re-running the baseline's spec with
    :func:`evaluate_spec` and ``evaluate_kwargs``) and compare them.

    >>> from rag_lab.eval.metrics import evaluate_retrieval
    >>> from rag_lab.eval.records import QueryRecord
    >>> from rag_lab.eval.report import EvalReport, SuiteResult
    >>> qrels = {f"q{i}": {f"d{i}"} for i in range(8)}
    >>> def report(runs):
    ...     recs = [QueryRecord(q, "?", sorted(g), [], retrieved_doc_ids=runs[q]) for q, g in qrels.items()]
    ...     rr = evaluate_retrieval(runs, qrels, ks=(1, 5, 10))
    ...     return EvalReport([SuiteResult("s", "demo", "kb", {}, {}, rr, recs)])
    >>> good = report({q: [next(iter(g)), "x"] for q, g in qrels.items()})
    >>> worse = report({q: ["x", "y"] for q in qrels})
    >>> run_gate(good, good).passed, run_gate(good, worse).exit_code
    (True, 1)
    >>> all(c.current < c.baseline for c in run_gate(good, worse).failures())  # what regressed
    True
    """
    try:
        base = baseline if isinstance(baseline, EvalReport) else load_report(baseline)
        if current is None:
            cur = evaluate_spec(baseline_spec(base), **evaluate_kwargs)
        else:
            cur = current if isinstance(current, EvalReport) else load_report(current)
    except ReportError as exc:
        raise GateError(str(exc)) from None
    return compare_reports(base, cur, policy)


def parse_metric_tolerances(items: Iterable[str]) -> tuple[list[str], dict[str, float]]:
    """``["ndcg@10", "mrr:0.05"]`` → metrics and per-metric tolerances."""
    metrics: list[str] = []
    tols: dict[str, float] = {}
    for item in items:
        name, _, tol = item.partition(":")
        name = name.strip()
        if not name:
            raise GateError(f"--metric {item!r}: empty metric name")
        metrics.append(name)
        if tol:
            try:
                tols[name] = float(tol)
            except ValueError:
                raise GateError(f"--metric {item!r}: tolerance {tol!r} is not a number") from None
    return metrics, tols
