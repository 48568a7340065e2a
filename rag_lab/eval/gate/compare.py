"""Baseline vs current report: one :class:`~rag_lab.eval.gate.result.MetricCheck` per suite and
gated metric (paired test, NaN and missing rules, headroom), the per-suite error check, the
questions that changed, and the params that differ."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag_lab.eval.gate.result import (
    DEFAULT_GATE_METRICS,
    ERRORS_METRIC,
    GateError,
    GatePolicy,
    GateResult,
    MetricCheck,
    QueryChange,
)
from rag_lab.eval.gate.stats import bootstrap_ci, detectable_effect, effect_size, min_queries_to_detect
from rag_lab.eval.report import EvalReport, SuiteResult, short_text


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
