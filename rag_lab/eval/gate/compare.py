"""Baseline vs current report: one :class:`~rag_lab.eval.gate.result.MetricCheck` per suite and
gated metric (paired tests with Holm's correction across checks, the interval decision, NaN and
missing rules), the per-question error check of each suite, the questions that changed, and the params
that differ."""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence

import numpy as np

from rag_lab.eval.gate.changes import QueryChange
from rag_lab.eval.gate.provenance import provenance_warnings
from rag_lab.eval.gate.result import (
    ADJUSTED,
    DEFAULT_GATE_METRICS,
    ERRORS_METRIC,
    GateError,
    GatePolicy,
    GateResult,
    MetricCheck,
)
from rag_lab.eval.gate.stats import effect_size, holm_adjust, paired_test, questions_to_settle
from rag_lab.eval.judge.repeats import suite_unstable
from rag_lab.eval.metric_defs import metric as metric_info
from rag_lab.eval.report import EvalReport, ReportError, SuiteResult, short_text, validate_report
from rag_lab.eval.review import refuse_unreviewed, unreviewed_count, unreviewed_warnings

#: paired differences smaller than this are float noise, not a change
NO_CHANGE = 1e-9


def _missing_check(suite: str, metric: str, baseline: float, tol: float, note: str) -> MetricCheck:
    return MetricCheck(suite, metric, baseline, math.nan, math.nan, tol, math.nan, 0, 0, 0, "missing", note)


def _judge_name(suites: Sequence[SuiteResult]) -> str:
    models = [str((s.ragas.judge or {}).get("model") or "") for s in suites if s.ragas is not None]
    return next((m for m in models if m), "")


def _first_reason(suites: Sequence[SuiteResult], metric: str) -> str:
    for s in suites:
        for reason in ((s.ragas.reasons if s.ragas is not None else {}).get(metric) or {}).values():
            if reason:
                return short_text(str(reason), 120)
    return ""


def _measure(base: SuiteResult, cur: SuiteResult, metric: str, policy: GatePolicy) -> tuple[MetricCheck, list[float]]:
    """The check's numbers and its paired differences (repeated judge scores enter as each
    question's mean; no question is left out). The p-values are corrected and the status set by
    :func:`_decide` once every check is measured (the correction spans all of them)."""
    tol = policy.tolerance_for(metric)
    bvals, cvals = base.values().get(metric), cur.values().get(metric)
    bmean = base.summary().get(metric, math.nan)
    if cvals is None or bvals is None:
        return _missing_check(base.name, metric, bmean, tol, "metric missing from the current run"), []
    cmean = cur.summary().get(metric, math.nan)
    unstable = list(dict.fromkeys(suite_unstable(base.ragas, metric, tol) + suite_unstable(cur.ragas, metric, tol)))
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
        math.nan,
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
    if missing_q:
        check.note = f"{len(missing_q)} baseline queries missing from the current run (e.g. {missing_q[0]})"
    elif not pairs and not gained_nan:
        check.status = "no_samples"
        judge, reason = _judge_name([base, cur]), _first_reason([cur, base], metric)
        extra = ", ".join(x for x in (f"judge {judge}" if judge else "", f"e.g. {reason}" if reason else "") if x)
        side = "the baseline" if math.isfinite(cmean) else "the baseline and the current run"
        check.note = f"no valid samples in {side}" + (f" ({extra})" if extra else "")
    if moved:
        t = paired_test(
            diffs, tol, test=policy.test, level=policy.ci_level, n_resamples=policy.n_resamples, seed=policy.seed
        )
        check.p_value, check.p_up, check.p_ni = t.p_drop, t.p_up, t.p_ni
        check.ci_low, check.ci_high = t.ci
    elif diffs:
        check.ci_low = check.ci_high = 0.0
    try:
        check.saturated = metric_info(metric).saturated(bmean, tol)
    except KeyError:
        check.saturated = ""
    return check, diffs


def _decide(c: MetricCheck, diffs: Sequence[float], level: float, policy: GatePolicy) -> None:
    """Set ``status`` and ``note`` from the corrected p-values (see the package docstring);
    ``level`` is the level the smallest p must beat under the correction (the inconclusive
    check's estimate of the questions that would settle it)."""
    if c.status not in ("missing", "no_samples"):
        _decide_status(c, diffs, level, policy)
    if c.saturated == "ceiling" and c.status in ("ok", "unchanged"):
        c.note = (c.note + "; " if c.note else "") + "at the ceiling: it cannot rise, gated against drops"


def _decide_status(c: MetricCheck, diffs: Sequence[float], level: float, policy: GatePolicy) -> None:
    tol, alpha = c.tolerance, policy.alpha
    where = f"{c.n_worse} of {c.n_pairs} questions worse"
    holm = policy.correction == "holm"
    ci = f"{round(policy.ci_level * 100):d}% CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}]"
    if not math.isfinite(c.current):
        c.status, c.note = "nan", "current mean is NaN (no valid sample)"
    elif c.gained_nan:
        c.status = "nan"
        c.note = (
            f"{len(c.gained_nan)} question(s) became NaN / failed (e.g. {c.gained_nan[0]}); NaN is a failure "
            f"(the means are over each run's valid questions, the delta over the {c.n_pairs} valid in both)"
        )
    elif c.n_informative == 0:
        c.status = "unchanged"
    elif c.delta < -tol:
        p_txt = f"p={c.p_value:.4g}" + (f", Holm {c.p_adjusted:.4g}" if holm else "")
        if c.p_adjusted < alpha:
            c.status = "regression"
            c.note = f"mean dropped by {-c.delta:.4f} > tolerance {tol:g}, {ci} (paired {policy.test} {p_txt} < {alpha:g}; {where})"
        else:
            c.status = "probable_regression"
            c.note = (
                f"mean dropped by {-c.delta:.4f} > tolerance {tol:g}, {ci}, not significant ({p_txt}; {where}): "
                "a drop this large fails whatever the slice's size"
            )
    elif c.p_ni_adjusted >= alpha:
        c.status = "inconclusive"
        c.allowed = policy.allow_underpowered
        c.n_needed = questions_to_settle(diffs, tol, level, policy.power, policy.test)
        p_txt = f"p={c.p_ni:.4g}" + (f", Holm {c.p_ni_adjusted:.4g}" if holm else "")
        need = (
            f"about {c.n_needed} questions with changes like these would settle it"
            if c.n_needed is not None
            else "no number of questions would rule it out"
        )
        c.note = (
            f"inconclusive: mean {c.delta:+.4f} is within the tolerance {tol:g} but {ci} does not rule out a "
            f"drop of {tol:g} (non-inferiority {p_txt} >= {alpha:g}; {where}); {need} ({c.n_pairs} now)"
            + ("; allowed by --allow-underpowered" if c.allowed else "; --allow-underpowered lets it pass")
        )
    elif c.delta > tol and c.p_up_adjusted < alpha:
        c.status = "improved"
        c.note = f"mean rose by {c.delta:.4f}, {ci} (p={c.p_up_adjusted:.4g}); refresh the baseline to keep it"
    else:
        c.status = "ok"


def _adjust(checks: Sequence[MetricCheck], policy: GatePolicy) -> None:
    """Holm across the gate's tested checks, each family apart: the drop, rise and
    non-inferiority p-values (without correction, adjusted = raw)."""
    for attr in ("p_value", "p_up", "p_ni"):
        raw = [getattr(c, attr) for c in checks]
        adj = holm_adjust(raw) if policy.correction == "holm" else raw
        for c, a in zip(checks, adj):
            setattr(c, ADJUSTED[attr], a)


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


def _change_order(ch: QueryChange) -> tuple[bool, float, float, int, str, str]:
    return (not ch.gained_failure, ch.worst, sum(ch.deltas.values()), -len(ch.changed), ch.suite, ch.qid)


def _effective_params(report: EvalReport, suite: SuiteResult, with_lab: bool) -> dict[str, object]:
    lab = report.meta.get("lab_params") if with_lab else None
    return {**(dict(lab) if isinstance(lab, Mapping) else {}), **dict(suite.params or {})}


def changed_params(baseline: EvalReport, current: EvalReport) -> dict[str, dict[str, list[object]]]:
    """Per suite, the params whose effective value differs: ``{suite: {name: [baseline, current]}}``
    (the lab's params stored in ``meta.lab_params`` with the suite's overrides on top; only the
    overrides when either report has no ``meta.lab_params``)."""
    out: dict[str, dict[str, list[object]]] = {}
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
    diffs_of: dict[int, list[float]] = {}  # check index -> its paired differences
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
            check, diffs_of[len(checks)] = _measure(base, cur, m, pol)
            checks.append(check)
        checks.append(_errors_check(base, cur))
        changes += query_changes(base, cur, gated)
    if not checks:
        raise GateError("nothing to gate: the baseline has no suites / gated metrics")
    measured = [i for i, c in enumerate(checks) if c.metric != ERRORS_METRIC and c.status != "missing"]
    tested = [checks[i] for i in measured if math.isfinite(checks[i].p_value)]
    _adjust(tested, pol)
    level = pol.alpha / len(tested) if pol.correction == "holm" and tested else pol.alpha
    for i in measured:
        _decide(checks[i], diffs_of[i], level, pol)
    changes.sort(key=_change_order)
    warnings = provenance_warnings(baseline, current, pol.max_age_days, now)
    warnings += unreviewed_warnings(baseline.meta, current.meta, pol.allow_unreviewed)
    return GateResult(checks, pol, current, changes, changed_params(baseline, current), warnings, unreviewed)
