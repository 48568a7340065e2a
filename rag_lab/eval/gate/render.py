"""Text views of a :class:`~rag_lab.eval.gate.result.GateResult`: the fixed-width console table,
``gate.md``, the step summary and ``gate.junit.xml`` (``gate.html`` is drawn by
:mod:`rag_lab.lab.pages.gate` from the same words and numbers)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from xml.etree import ElementTree as ET

from rag_lab.eval.report import md_cell, short_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.gate.result import GateResult, MetricCheck


def gate_table(res: GateResult, max_changes: int = 10) -> str:
    """A fixed-width table of every check, the changed params, the worst changed questions,
    then a one-line verdict."""
    lvl = f"{round(res.policy.ci_level * 100):d}% CI"
    head = (
        "suite",
        "metric",
        "baseline",
        "current",
        "delta",
        lvl,
        "tol",
        "p",
        "p adj",
        "p NI adj",
        "moved",
        "NaN b/c",
        "status",
    )
    rows = [head]
    for c in res.checks:
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
                _f(c.p_adjusted),
                _f(c.p_ni_adjusted),
                f"{c.n_informative}/{c.n_pairs}",
                f"{c.bad_baseline}/{c.bad_current}",
                _status(c),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for c in res.checks:
        if c.note:
            lines.append(f"  {c.suite} {c.metric}: {c.note}")
    lines += [f"warning: {w}" for w in res.warnings]
    lines += unstable_lines(res)
    lines.append(res.params_line())
    if res.changes:
        lines.append(f"per-question changes: {len(res.changes)} (worst first)")
        for ch in res.changes[:max_changes]:
            lines.append(f"  {ch.suite}/{ch.qid} {short_text(ch.question, 60)!r}: {ch.describe()}")
        if len(res.changes) > max_changes:
            lines.append(f"  … {len(res.changes) - max_changes} more in gate.md / gate.json")
    else:
        lines.append("per-question changes: none (every ranking, context list and answer is the same)")
    return "\n".join(lines + [res.verdict()])


def gate_junit(res: GateResult) -> str:
    root = ET.Element("testsuites", name="rag_lab.gate", tests=str(len(res.checks)), failures=str(len(res.failures())))
    by_suite: dict[str, list[MetricCheck]] = {}
    for c in res.checks:
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
                f"tol={_f(c.tolerance)} p={_f(c.p_value)} p_adj={_f(c.p_adjusted)} p_ni_adj={_f(c.p_ni_adjusted)} "
                f"moved={c.n_informative}/{c.n_pairs} status={c.status} tier={c.tier}"
            )
            if c.failed:
                ET.SubElement(tc, "failure", message=f"{c.metric} {c.status}: {c.note or _f(c.delta, True)}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def gate_markdown(res: GateResult, max_changes: int = 200) -> str:
    lvl = f"{round(res.policy.ci_level * 100):d}% CI"
    lines = [
        "# Regression gate",
        "",
        res.verdict(),
        "",
        *[f"- warning: {md_cell(w)}" for w in res.warnings],
        *[f"- {md_cell(u)}" for u in unstable_lines(res)],
        *([""] if res.warnings or res.unstable_count() else []),
        res.params_line(),
        "",
        f"| suite | metric | family | baseline | current | delta | {lvl} | tol | p | p adj | p NI adj | d_z | moved "
        "| worse/better | NaN b/c | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in res.checks:
        lines.append(
            f"| {c.suite} | {c.metric} | {c.family} | {_f(c.baseline)} | {_f(c.current)} | {_f(c.delta, True)} | "
            f"{_ci(c)} | {_f(c.tolerance)} | {_f(c.p_value)} | {_f(c.p_adjusted)} | {_f(c.p_ni_adjusted)} | "
            f"{_f(c.effect_size, True)} | {c.n_informative}/{c.n_pairs} | {c.n_worse}/{c.n_better} | "
            f"{c.bad_baseline}/{c.bad_current} | {'**' + _status(c) + '**' if c.failed else _status(c)} |"
        )
    notes = [f"- {c.suite} {c.metric}: {md_cell(c.note)}" for c in res.checks if c.note]
    if notes:
        lines += ["", *notes]
    lines += ["", f"## Per-question changes ({len(res.changes)}, worst first)", ""]
    if not res.changes:
        lines.append("None: every question's ranking, final contexts and answer equal the baseline's.")
    else:
        lines += ["| suite | qid | question | what changed | worst delta |", "|---|---|---|---|---|"]
        for ch in res.changes[:max_changes]:
            lines.append(
                f"| {ch.suite} | {ch.qid} | {md_cell(short_text(ch.question, 120))} | {md_cell(ch.describe())} | "
                f"{_f(ch.worst, True)} |"
            )
        if len(res.changes) > max_changes:
            lines.append(f"\n… {len(res.changes) - max_changes} more in gate.json")
    lines.append("")
    return "\n".join(lines)


def gate_summary_markdown(res: GateResult, max_items: int = 10) -> str:
    """The verdict first, then one table per tier that needs reading (regressions, probable
    regressions, inconclusive checks, improvements; the passed ones counted), the worst changed questions and the warnings:
    short enough for ``$GITHUB_STEP_SUMMARY`` or a pull-request comment."""
    mark = "PASSED" if res.passed else "FAILED"
    verdict = res.verdict()
    detail = verdict.split(": ", 1)[1] if verdict.startswith(f"GATE {mark}: ") else verdict  # the heading says it
    lines = [f"### rag_lab gate: {mark}", "", f"**{md_cell(detail)}**", ""]
    tiers = res.tiers()
    heads = {
        "regression": "Regressions",
        "probable regression": "Probable regressions (mean drop beyond the tolerance, not significant)",
        "inconclusive": "Inconclusive (within the tolerance, but a drop of it is not ruled out)",
        "improvement": "Improvements",
    }
    for tier, title in heads.items():
        checks = tiers[tier]
        if not checks:
            continue
        lines += [
            f"#### {title}: {len(checks)}",
            "",
            "| suite | metric | baseline → current | delta | p (adj) | note |",
        ]
        lines.append("|---|---|---|---|---|---|")
        for c in checks[:max_items]:
            lines.append(
                f"| {md_cell(c.suite)} | {md_cell(c.metric)} | {_f(c.baseline)} → {_f(c.current)} | "
                f"{_f(c.delta, True)} | {_f(c.p_value)} ({_f(c.p_adjusted)}) | {md_cell(short_text(c.note, 200))} |"
            )
        if len(checks) > max_items:
            lines.append(f"\n… {len(checks) - max_items} more in gate.md")
        lines.append("")
    lines.append(
        f"{len(tiers['pass'])} checks passed (unchanged, or a drop of the tolerance ruled out); {res.params_line()}."
    )
    if res.changes:
        lines += ["", f"#### Changed questions: {len(res.changes)} (worst first)", ""]
        for ch in res.changes[:max_items]:
            lines.append(
                f"- `{md_cell(ch.suite)}/{md_cell(ch.qid)}` {md_cell(short_text(ch.question, 80))}: "
                f"{md_cell(ch.describe())}"
            )
    if res.warnings:
        lines += ["", *[f"> warning: {md_cell(w)}" for w in res.warnings]]
    lines += [f"> {md_cell(u)}" for u in unstable_lines(res)]
    lines.append("")
    return "\n".join(lines)


def unstable_lines(res: GateResult) -> list[str]:
    """One line per judge metric check with questions whose repeats spread wider than the tolerance."""
    out = []
    for c in res.checks:
        if c.unstable:
            head = ", ".join(c.unstable[:10]) + (", …" if len(c.unstable) > 10 else "")
            out.append(
                f"unstable: {c.suite}/{c.metric}: {len(c.unstable)} question(s) whose judge repeats spread > "
                f"{c.tolerance:g}, in the paired test as their means ({head})"
            )
    return out


def _status(c: MetricCheck) -> str:
    word = c.status.replace("_", " ")
    if c.status == "inconclusive" and c.allowed:
        return word + " (allowed)"
    return word.upper() if c.failed else word


def _f(v: float, signed: bool = False) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "NaN" if isinstance(v, float) else "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _ci(c: MetricCheck) -> str:
    if not (math.isfinite(c.ci_low) and math.isfinite(c.ci_high)):
        return "-"
    return f"[{c.ci_low:+.3f}, {c.ci_high:+.3f}]"
