"""Regression gate: compare a current evaluation with a committed baseline, metric by metric.

For each suite (dataset slice) and gated metric, the queries present in both reports are paired
and ``d_q = current_q - baseline_q`` computed (samples NaN on either side are left out of the pair
and counted). A metric **regresses** when both hold:

* the mean difference is below ``-tolerance`` (default 0.02, absolute; per-metric overrides), and
* a one-sided paired test over queries says the drop is unlikely to be chance: ``p < alpha``
  (default 0.05). The test is a sign-flip permutation test of the mean difference (exact over
  all 2^n sign vectors up to n = 16, else ``n_resamples`` random flips from ``seed``), or a
  paired bootstrap of the mean difference. Both are deterministic for a fixed seed.

It **fails** as well, whatever the difference, when the current mean is NaN, when the current run
has more NaN / failed samples than the baseline had (NaN is a failure, never averaged away), or
when a gated suite, metric or query of the baseline is missing from the current run. A metric
that rose by more than the tolerance with ``p < alpha`` is reported ``improved`` (passes; refresh
the baseline to lock it in).

:func:`run_gate` re-runs the baseline's own spec (suites, ks, ragas metrics, params) with the
offline defaults in a fresh workspace, unless a current report is given. Exit codes of the CLI:
0 pass, 1 regression / NaN / missing, 2 unusable input.
"""

from __future__ import annotations

import itertools
import math
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree as ET

import numpy as np

from rag_lab.eval.report import EvalReport, ReportError, SuiteResult, load_report

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

__all__ = [
    "DEFAULT_GATE_METRICS",
    "GateError",
    "GatePolicy",
    "GateResult",
    "MetricCheck",
    "compare_reports",
    "paired_bootstrap_pvalue",
    "paired_permutation_pvalue",
    "run_gate",
]

#: Metrics gated by default (those present in the baseline); others are shown but not gated.
DEFAULT_GATE_METRICS: tuple[str, ...] = (
    "ndcg@10",
    "ndcg@5",
    "recall@5",
    "recall@10",
    "precision@5",
    "hit@1",
    "mrr",
    "map",
    "id_context_recall",
    "id_context_precision",
    "nonllm_context_recall",
    "nonllm_context_precision",
    "string_similarity",
    "bleu",
    "rouge_l",
    "chrf",
    "faithfulness",
    "answer_relevancy",
    "llm_context_precision",
)
EXACT_PERMUTATION_MAX_N = 16


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


def paired_bootstrap_pvalue(diffs: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """One-sided bootstrap p-value of ``mean(diffs) < 0``: the share of resampled means (queries
    drawn with replacement) that are ``>= 0``, with the +1 correction. 1.0 for no pairs or all 0."""
    d = _diffs(diffs)
    n = d.size
    if n == 0 or not np.any(d):
        return 1.0
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < n_resamples:
        b = min(2000, n_resamples - done)
        idx = rng.integers(0, n, size=(b, n))
        hits += int(np.sum(d[idx].mean(axis=1) >= 0))
        done += b
    return (1 + hits) / (1 + n_resamples)


# --------------------------------------------------------------------------- policy and result


@dataclass
class GatePolicy:
    metrics: Sequence[str] | None = None  # None: DEFAULT_GATE_METRICS present in the baseline
    tolerance: float = 0.02
    tolerances: dict[str, float] = field(default_factory=dict)
    alpha: float = 0.05
    test: str = "permutation"  # "permutation" | "bootstrap"
    n_resamples: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.test not in ("permutation", "bootstrap"):
            raise GateError(f"test={self.test!r}: use 'permutation' or 'bootstrap'")
        if not 0 < self.alpha < 1:
            raise GateError(f"alpha={self.alpha!r} must be in (0, 1)")
        for name, tol in {"tolerance": self.tolerance, **self.tolerances}.items():
            if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
                raise GateError(f"tolerance for {name} = {tol!r} must be a number >= 0")

    def tolerance_for(self, metric: str) -> float:
        return float(self.tolerances.get(metric, self.tolerance))

    def pvalue(self, diffs: Sequence[float]) -> float:
        fn = paired_permutation_pvalue if self.test == "permutation" else paired_bootstrap_pvalue
        return fn(diffs, self.n_resamples, self.seed)


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
    status: str  # "ok" | "improved" | "regression" | "nan" | "missing"
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("regression", "nan", "missing")


@dataclass
class GateResult:
    checks: list[MetricCheck]
    policy: GatePolicy
    current: EvalReport | None = None

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def failures(self) -> list[MetricCheck]:
        return [c for c in self.checks if c.failed]

    def table(self) -> str:
        """A fixed-width table of every check, then a one-line verdict."""
        head = ("suite", "metric", "baseline", "current", "delta", "tol", "p", "pairs", "NaN b/c", "status")
        rows = [head]
        for c in self.checks:
            rows.append(
                (
                    c.suite,
                    c.metric,
                    _f(c.baseline),
                    _f(c.current),
                    _f(c.delta, signed=True),
                    _f(c.tolerance),
                    _f(c.p_value),
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
        bad = self.failures()
        verdict = (
            f"GATE PASSED: {len(self.checks)} checks, test={self.policy.test}, alpha={self.policy.alpha}"
            if not bad
            else f"GATE FAILED: {len(bad)} of {len(self.checks)} checks failed "
            f"({', '.join(f'{c.suite}/{c.metric} {c.status}' for c in bad)})"
        )
        return "\n".join(lines + [verdict])

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
                    f"baseline={_f(c.baseline)} current={_f(c.current)} delta={_f(c.delta, True)} "
                    f"tol={_f(c.tolerance)} p={_f(c.p_value)} pairs={c.n_pairs} status={c.status}"
                )
                if c.failed:
                    ET.SubElement(tc, "failure", message=f"{c.metric} {c.status}: {c.note or _f(c.delta, True)}")
        ET.indent(root)
        return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"

    def markdown(self) -> str:
        lines = [
            "# Regression gate",
            "",
            "| suite | metric | baseline | current | delta | tol | p | pairs | NaN b/c | status |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in self.checks:
            lines.append(
                f"| {c.suite} | {c.metric} | {_f(c.baseline)} | {_f(c.current)} | {_f(c.delta, True)} | "
                f"{_f(c.tolerance)} | {_f(c.p_value)} | {c.n_pairs} | {c.bad_baseline}/{c.bad_current} | "
                f"{'**' + c.status + '**' if c.failed else c.status} |"
            )
        lines += ["", "PASSED" if self.passed else "FAILED", ""]
        return "\n".join(lines)


def _f(v: float, signed: bool = False) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "NaN"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


# --------------------------------------------------------------------------- comparison


def _bad(values: Mapping[str, float]) -> int:
    return sum(1 for v in values.values() if not math.isfinite(v))


def _check_suite(base: SuiteResult, cur: SuiteResult, metric: str, policy: GatePolicy) -> MetricCheck:
    tol = policy.tolerance_for(metric)
    bvals, cvals = base.values().get(metric), cur.values().get(metric)
    bmean = base.summary().get(metric, math.nan)
    if cvals is None or bvals is None:
        return MetricCheck(
            base.name,
            metric,
            bmean,
            math.nan,
            math.nan,
            tol,
            math.nan,
            0,
            0,
            0,
            "missing",
            "metric missing from the current run",
        )
    cmean = cur.summary().get(metric, math.nan)
    bad_b, bad_c = _bad(bvals), _bad(cvals)
    missing_q = [q for q in bvals if q not in cvals]
    pairs = [(bvals[q], cvals[q]) for q in bvals if q in cvals and math.isfinite(bvals[q]) and math.isfinite(cvals[q])]
    diffs = [0.0 if abs(c - b) < 1e-9 else c - b for b, c in pairs]  # float noise is no change
    delta = float(np.mean(diffs)) if diffs else math.nan
    p = policy.pvalue(diffs) if diffs else math.nan
    check = MetricCheck(base.name, metric, bmean, cmean, delta, tol, p, len(pairs), bad_b, bad_c, "ok")
    if missing_q:
        check.status, check.note = (
            "missing",
            (f"{len(missing_q)} baseline queries missing from the current run (e.g. {missing_q[0]})"),
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
            f"mean dropped by {-delta:.4f} > tolerance {tol:g} (paired {policy.test} p={p:.4g} < {policy.alpha:g})"
        )
    elif diffs and delta > tol and (p_up := policy.pvalue([-x for x in diffs])) < policy.alpha:
        check.status = "improved"
        check.note = f"mean rose by {delta:.4f} (p={p_up:.4g}); refresh the baseline to keep it"
    return check


def compare_reports(baseline: EvalReport, current: EvalReport, policy: GatePolicy | None = None) -> GateResult:
    """Check every gated metric of every baseline suite against the current report."""
    pol = policy or GatePolicy()
    checks: list[MetricCheck] = []
    cur_by_name = {s.name: s for s in current.suites}
    for base in baseline.suites:
        cur = cur_by_name.get(base.name)
        names = base.metric_names()
        gated = [
            m
            for m in (pol.metrics if pol.metrics is not None else DEFAULT_GATE_METRICS)
            if pol.metrics is not None or m in names
        ]
        if cur is None:
            checks += [
                MetricCheck(
                    base.name,
                    m,
                    base.summary().get(m, math.nan),
                    math.nan,
                    math.nan,
                    pol.tolerance_for(m),
                    math.nan,
                    0,
                    0,
                    0,
                    "missing",
                    "suite missing from the current run",
                )
                for m in gated
            ]
            continue
        for m in gated:
            if m not in names:
                raise GateError(
                    f"gated metric {m!r} is not in the baseline suite {base.name!r} (it has: {', '.join(names)})"
                )
            checks.append(_check_suite(base, cur, m, pol))
    if not checks:
        raise GateError("nothing to gate: the baseline has no suites / gated metrics")
    return GateResult(checks, pol, current)


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
    :func:`evaluate_spec` and ``evaluate_kwargs``) and compare them."""
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
