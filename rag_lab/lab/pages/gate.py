"""The regression gate's HTML page (``gate.html.j2``): the verdict, the warnings, the changed
params, every check with its confidence interval (sortable), and the per-question changes worst
first with the question, what changed, both rankings and both answers (sortable). The words and
numbers are those of :mod:`rag_lab.eval.gate.render`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rag_lab.eval.gate.render import _ci, _f, _status
from rag_lab.eval.report import short_text
from rag_lab.lab.pages.render import render_page

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.gate.changes import QueryChange
    from rag_lab.eval.gate.result import GateResult, MetricCheck

__all__ = ["gate_html"]


def _cell(v: float, signed: bool = False) -> dict[str, str]:
    """A sortable cell: its value (NaN when not a number) and its text ("-" then)."""
    ok = isinstance(v, (int, float)) and math.isfinite(v)
    return {"key": str(float(v)) if ok else "NaN", "text": _f(v, signed) if ok else "-"}


def _check(c: MetricCheck) -> dict[str, object]:
    return {
        "failed": c.failed,
        "suite": c.suite,
        "metric": c.metric,
        "family": c.family,
        "baseline": _cell(c.baseline),
        "current": _cell(c.current),
        "delta": _cell(c.delta, True),
        "ci": _ci(c),
        "p": _cell(c.p_value),
        "p_adj": _cell(c.p_adjusted),
        "p_ni_adj": _cell(c.p_ni_adjusted),
        "d_z": _cell(c.effect_size, True),
        "n_needed": c.n_needed if c.n_needed is not None else "-",
        "moved": c.n_informative,
        "pairs": c.n_pairs,
        "worse": c.n_worse,
        "better": c.n_better,
        "tier": c.tier,
        "status": _status(c),
        "note": c.note,
    }


def _change(ch: QueryChange) -> dict[str, object]:
    return {
        "cls": "worse" if ch.worst < 0 else ("better" if ch.deltas else ""),
        "suite": ch.suite,
        "qid": ch.qid,
        "question": ch.question,
        "changed": ", ".join(ch.changed),
        "worst": _cell(ch.worst, True),
        "deltas": ", ".join(f"{m} {d:+.3f}" for m, d in sorted(ch.deltas.items(), key=lambda kv: kv[1])),
        "gold": ", ".join(ch.gold_ids),
        "baseline_ids": ", ".join(ch.baseline_ids[:10]),
        "current_ids": ", ".join(ch.current_ids[:10]),
        "baseline_answer": short_text(ch.baseline_answer, 400),
        "current_answer": short_text(ch.current_answer, 400),
    }


def gate_html(res: GateResult, max_changes: int = 500) -> str:
    """gate.html: the page of a gate result (the first ``max_changes`` question changes)."""
    return render_page(
        "gate.html.j2",
        passed=res.passed,
        verdict=res.verdict(),
        warnings=list(res.warnings),
        params_line=res.params_line(),
        ci_label=f"{round(res.policy.ci_level * 100):d}% CI",
        checks=[_check(c) for c in res.checks],
        n_changes=len(res.changes),
        changes=[_change(ch) for ch in res.changes[:max_changes]],
    )
