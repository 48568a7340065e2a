"""Baseline vs current report: one :class:`~rag_lab.eval.gate.result.MetricCheck` per suite and
gated metric (paired test with Holm's correction across checks, the power check, NaN and missing
rules), the per-question error check of each suite, the questions that changed, and the params
that differ."""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rag_lab.eval.gate.provenance import provenance_warnings
from rag_lab.eval.gate.result import (
    DEFAULT_GATE_METRICS,
    ERRORS_METRIC,
    GateError,
    GatePolicy,
    GateResult,
    MetricCheck,
    QueryChange,
)
from rag_lab.eval.gate.stats import (
    bootstrap_ci,
    detectable_effect,
    effect_size,
    holm_adjust,
    min_queries_to_detect,
)
from rag_lab.eval.judge.repeats import suite_unstable
from rag_lab.eval.metric_defs import metric as metric_info
from rag_lab.eval.report import EvalReport, ReportError, SuiteResult, short_text, validate_report
from rag_lab.eval.review import refuse_unreviewed, unreviewed_count, unreviewed_warnings

#: paired differences smaller than this are float noise, not a change
NO_CHANGE = 1e-9


def _missing_check(suite: str, metric: str, baseline: float, tol: float, note: str) -> MetricCheck:
    return MetricCheck(suite, metric, baseline, math.nan, math.nan, tol, math.nan, 0, 0, 0, "missing", note)


def _measure(base: SuiteResult, cur: SuiteResult, metric: str, policy: GatePolicy) -> tuple[MetricCheck, list[float]]:
    """The check's numbers (paired differences, p-values, CI) and the values whose spread sets
    its power: the observed per-question changes once questions moved, else (a priori) the
    baseline's values. Power and status are set by :func:`_power` and :func:`_decide` once every
    check's p-value is known (the correction spans all of them)."""
    tol = policy.tolerance_for(metric)
    bvals, cvals = base.values().get(metric), cur.values().get(metric)
    bmean = base.summary().get(metric, math.nan)
    if cvals is None or bvals is None:
        return _missing_check(base.name, metric, bmean, tol, "metric missing from the current run"), []
    cmean = cur.summary().get(metric, math.nan)
    unstable = list(dict.fromkeys(suite_unstable(base.ragas, metric, tol) + suite_unstable(cur.ragas, metric, tol)))
    if unstable:  # judge noise wider than the tolerance: no evidence either way, left out of the test
        bvals = {q: v for q, v in bvals.items() if q not in unstable}
        cvals = {q: v for q, v in cvals.items() if q not in unstable}
    missing_q = [q for q in bvals if q not in cvals]
    gained_nan = [q for q in bvals if q in cvals and math.isfinite(bvals[q]) and not math.isfinite(cvals[q])]
    pairs = [(bvals[q], cvals[q]) for q in bvals if q in cvals and math.isfinite(bvals[q]) and math.isfinite(cvals[q])]
    diffs = [0.0 if abs(c - b) < NO_CHANGE else c - b for b, c in pairs]
    moved = sum(1 for x in diffs if x != 0.0)
    check = MetricCheck(
        base.name,
        metric,
        bmean,
        cmean,
        float(np.mean(diffs)) if diffs else math.nan,
        tol,
        policy.pvalue(diffs) if diffs else math.nan,
        len(pairs),
        sum(1 for v in bvals.values() if not math.isfinite(v)),
        sum(1 for v in cvals.values() if not math.isfinite(v)),
        "missing" if missing_q else "ok",
        effect_size=effect_size(diffs) if diffs else math.nan,
        n_worse=sum(1 for x in diffs if x < 0),
        n_better=sum(1 for x in diffs if x > 0),
        n_informative=moved,
        gained_nan=gained_nan,
        unstable=unstable,
    )
    if unstable and not pairs:
        check.status = "unstable"
        check.allowed = policy.allow_underpowered
        check.note = (
            f"insufficient data: all {len(unstable)} scored question(s) are unstable (judge repeats spread > {tol:g}); "
            "use a steadier judge or more repeats" + ("; allowed by --allow-underpowered" if check.allowed else "")
        )
        return check, []
    if diffs:
        check.ci_low, check.ci_high = bootstrap_ci(diffs, policy.ci_level, policy.n_resamples, policy.seed)
    check.p_adjusted = check.p_value
    check.p_up = policy.pvalue([-x for x in diffs]) if moved else math.nan
    check.p_up_adjusted = check.p_up
    if missing_q:
        check.note = f"{len(missing_q)} baseline queries missing from the current run (e.g. {missing_q[0]})"
    try:
        check.saturated = metric_info(metric).saturated(bmean, tol)
    except KeyError:
        check.saturated = ""
    return check, diffs if moved else list(bvals.values())


def _unstable_note(c: MetricCheck) -> str:
    if not c.unstable:
        return ""
    head = ", ".join(c.unstable[:5]) + (", …" if len(c.unstable) > 5 else "")
    return (
        f"{len(c.unstable)} unstable question(s) left out of the paired test (judge repeats spread > "
        f"{c.tolerance:g}: {head})"
    )


def _power(c: MetricCheck, spread: Sequence[float], level: float, policy: GatePolicy) -> None:
    """What the slice can detect at ``level`` (alpha, or alpha / m under Holm: the level the
    smallest of m p-values must beat): ``min_queries`` and the minimum detectable effect."""
    c.power_alpha = level
    c.min_queries = min_queries_to_detect(c.n_pairs, level, policy.test)
    c.mde = detectable_effect(spread, level, policy.power) if spread else math.nan


def powered(c: MetricCheck) -> bool:
    """The slice can detect a drop of the check's tolerance: enough questions moved for the test to
    ever reach significance (``min_queries``) and the minimum detectable effect is within the
    tolerance."""
    return c.min_queries is not None and c.n_informative >= c.min_queries and c.mde <= c.tolerance


def _decide(c: MetricCheck, policy: GatePolicy) -> None:
    """Set ``status`` and ``note`` from the (adjusted) p-values: regression, NaN, insufficient
    data (a fall the slice cannot tell from chance), improvement, ok or unchanged."""
    if c.status in ("missing", "unstable"):
        return
    _decide_status(c, policy)
    c.note = "; ".join(x for x in (_unstable_note(c), c.note) if x)


def _decide_status(c: MetricCheck, policy: GatePolicy) -> None:
    tol, alpha = c.tolerance, policy.alpha
    where = f"{c.n_worse} of {c.n_pairs} questions worse"
    p_txt = f"p={c.p_value:.4g}" + (f", Holm {c.p_adjusted:.4g}" if policy.correction == "holm" else "")
    if not math.isfinite(c.current):
        c.status, c.note = "nan", "current mean is NaN (no valid sample)"
    elif c.gained_nan:
        c.status = "nan"
        c.note = f"{len(c.gained_nan)} question(s) became NaN / failed (e.g. {c.gained_nan[0]}); NaN is a failure"
    elif c.n_informative == 0:
        c.status = "unchanged"
    elif c.delta < -tol and c.p_adjusted < alpha:
        c.status = "regression"
        c.note = (
            f"mean dropped by {-c.delta:.4f} > tolerance {tol:g} (paired {policy.test} {p_txt} < {alpha:g}; {where})"
        )
    elif c.delta > tol and c.p_up_adjusted < alpha:
        c.status = "improved"
        c.note = f"mean rose by {c.delta:.4f} (p={c.p_up:.4g}); refresh the baseline to keep it"
    elif c.delta < 0 and not powered(c):
        c.status = "underpowered"
        c.allowed = policy.allow_underpowered
        lvl = f"{c.power_alpha:.3g}" + (" (alpha / checks, Holm)" if c.power_alpha < alpha else "")
        why = []
        if c.min_queries is None:
            why.append(f"{c.n_pairs} questions can never reach p < {lvl}")
        elif c.n_informative < c.min_queries:
            why.append(f"{c.n_informative} moved where the test needs >= {c.min_queries} to reach p < {lvl}")
        if not c.mde <= tol:
            why.append(f"it detects only drops >= {c.mde:.4f} (mde at {lvl}, power {policy.power:g})")
        c.note = (
            f"insufficient data: mean fell by {-c.delta:.4f} ({where}, {p_txt}) but this slice cannot detect a "
            f"drop of {tol:g}: {'; '.join(why)}. Evaluate more questions, gate with --fail-on-change "
            "(deterministic pipelines)"
            + (", or pass --allow-underpowered" if not c.allowed else "; allowed by --allow-underpowered")
        )
    else:
        c.status = "ok"
    if c.saturated == "ceiling" and c.status in ("ok", "unchanged"):
        c.note = (c.note + "; " if c.note else "") + "at the ceiling: it cannot rise, gated against drops"


def _adjust(checks: Sequence[MetricCheck], policy: GatePolicy) -> None:
    """Holm across every metric check of the gate: the drop p-values, and apart the rise ones."""
    if policy.correction != "holm":
        return
    for attr, out in (("p_value", "p_adjusted"), ("p_up", "p_up_adjusted")):
        adj = holm_adjust([getattr(c, attr) for c in checks])
        for c, a in zip(checks, adj):
            setattr(c, out, a)


def _errors_check(base: SuiteResult, cur: SuiteResult) -> MetricCheck:
    """Pipeline / model errors (answer stream failed or cut, a stage raised), compared question by
    question: any question of the baseline that has an error now and had none fails."""
    b, c = base.errors, cur.errors
    check = MetricCheck(base.name, ERRORS_METRIC, float(b), float(c), float(c - b), 0.0, math.nan, 0, 0, 0, "ok")
    had = {r.qid for r in base.records if r.error}
    now = {r.qid: r for r in cur.records if r.error}
    known = {r.qid for r in base.records}
    gained = [r for q, r in now.items() if q in known and q not in had]
    check.n_pairs = len(known)
    check.n_informative = len(gained) + len(had - set(now))
    if gained:
        check.status = "errors"
        check.note = f"{len(gained)} question(s) with a new pipeline/model error (baseline {b}, now {c}), e.g. " + (
            f"{gained[0].qid}: {short_text(gained[0].error, 120)}"
        )
    elif check.n_informative == 0 and b == c:
        check.status = "unchanged"
    return check


def query_changes(base: SuiteResult, cur: SuiteResult, metrics: Sequence[str]) -> list[QueryChange]:
    """Every question of ``base`` whose error, ranked document ids, final contexts, answer or gated
    metric values differ in ``cur`` (a metric that became NaN included), new failures first, then
    worst first (largest drop on a gated metric, then most changed)."""
    bvals, cvals = base.values(), cur.values()
    cur_recs = {r.qid: r for r in cur.records}
    out: list[QueryChange] = []
    for b in base.records:
        c = cur_recs.get(b.qid)
        if c is None:
            continue  # reported by the metric checks as missing
        changed = []
        if (b.error or "") != (c.error or ""):
            changed.append("error")
        deltas: dict[str, float] = {}
        nan_metrics: list[str] = []
        for m in metrics:
            bv, cv = bvals.get(m, {}).get(b.qid, math.nan), cvals.get(m, {}).get(b.qid, math.nan)
            if math.isfinite(bv) and math.isfinite(cv):
                if abs(cv - bv) >= NO_CHANGE:
                    deltas[m] = cv - bv
            elif math.isfinite(bv):
                nan_metrics.append(m)
                if bv > 0:
                    deltas[m] = -bv  # became NaN / failed: counted as a drop to 0
        if nan_metrics:
            changed.append("nan")
        if list(b.retrieved_doc_ids) != list(c.retrieved_doc_ids):
            changed.append("ranking")
        if b.context_ids and list(b.context_ids) != list(c.context_ids):
            changed.append("contexts")
        if b.answer != c.answer:
            changed.append("answer")
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
                    b.error or "",
                    c.error or "",
                    nan_metrics,
                )
            )
    out.sort(key=_change_order)
    return out


def _change_order(ch: QueryChange) -> tuple[Any, ...]:
    return (not ch.gained_failure, ch.worst, sum(ch.deltas.values()), -len(ch.changed), ch.suite, ch.qid)


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


def compare_reports(
    baseline: EvalReport,
    current: EvalReport,
    policy: GatePolicy | None = None,
    *,
    now: datetime.datetime | None = None,
) -> GateResult:
    """Check every gated metric of every baseline suite against the current report (both reports
    validated first: :class:`GateError` naming the report, suite, question and field), correct
    the p-values across the checks, and list the questions that changed."""
    pol = policy or GatePolicy()
    for label, rep in (("baseline", baseline), ("current", current)):
        try:
            validate_report(rep, str(rep.meta.get("source") or label))
        except ReportError as exc:
            raise GateError(str(exc)) from None
    unreviewed = {"baseline": unreviewed_count(baseline.meta), "current": unreviewed_count(current.meta)}
    if unreviewed["baseline"] and not pol.allow_unreviewed:
        raise GateError(
            refuse_unreviewed(
                baseline.meta, " ".join(filter(None, ["the baseline", baseline.meta.get("source"), "is"]))
            )
        )
    checks: list[MetricCheck] = []
    spread: dict[int, list[float]] = {}  # check index -> the values whose spread sets its power
    changes: list[QueryChange] = []
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
            gated = [m for m in DEFAULT_GATE_METRICS if m in names]
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
        for m in gated:
            check, spread[len(checks)] = _measure(base, cur, m, pol)
            checks.append(check)
        checks.append(_errors_check(base, cur))
        changes += query_changes(base, cur, gated)
    if not checks:
        raise GateError("nothing to gate: the baseline has no suites / gated metrics")
    measured = [
        i for i, c in enumerate(checks) if c.metric != ERRORS_METRIC and c.status not in ("missing", "unstable")
    ]
    _adjust([checks[i] for i in measured], pol)
    level = pol.alpha / len(measured) if pol.correction == "holm" and measured else pol.alpha
    for i in measured:
        _power(checks[i], spread[i], level, pol)
        _decide(checks[i], pol)
    changes.sort(key=_change_order)
    warnings = provenance_warnings(baseline, current, pol.max_age_days, now)
    warnings += unreviewed_warnings(baseline.meta, current.meta, pol.allow_unreviewed)
    return GateResult(checks, pol, current, changes, changed_params(baseline, current), warnings, unreviewed)
