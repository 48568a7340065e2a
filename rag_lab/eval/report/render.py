"""The report's text views: Markdown, JUnit XML (one test case per suite and metric) and the
terminal table of suite means, with the pieces the HTML page (:mod:`rag_lab.lab.pages.report`)
reads the same way: the summary rows, the main metrics, the per-query order and titles, the
failed samples. :func:`short_text` and :func:`md_cell` are shared with the gate's views."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from xml.etree import ElementTree as ET

from rag_lab.eval.records import QueryRecord, answer_text
from rag_lab.eval.report.funnel_render import funnel_markdown, is_funnel_metric
from rag_lab.eval.report.judge_render import calibration_markdown, repeats_markdown, review_markdown
from rag_lab.eval.report.model import EvalReport, SuiteResult
from rag_lab.eval.saturation import saturation_line


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "NaN" if not math.isfinite(v) else f"{v:.4f}"
    return str(v)


def _summary_rows(suite: SuiteResult) -> list[tuple[str, str, int, int, int, int]]:
    s, c = suite.summary(), suite.counts()
    names = [m for m in suite.metric_names() if not is_funnel_metric(m)]  # the funnel has its own table
    return [(m, _fmt(s[m]), c[m]["n"], c[m]["n_valid"], c[m]["n_nan"], c[m]["n_failed"]) for m in names]


def _main_metrics(suite: SuiteResult) -> list[str]:
    kmax = max(suite.retrieval.ks)
    kmid = 5 if 5 in suite.retrieval.ks else kmax
    names = [f"ndcg@{kmax}", f"recall@{kmid}", "mrr"]
    if suite.ragas is not None:
        names += [m for m in ("id_context_recall", "chrf", "faithfulness") if m in suite.ragas.metrics]
    return names


def _failures(suite: SuiteResult) -> list[str]:
    lines = [f"{r.qid}: pipeline error: {r.error}" for r in suite.records if r.error]
    if suite.ragas is not None:
        for m, by_q in suite.ragas.reasons.items():
            for q, why in by_q.items():
                lines.append(f"{q}: {m}: {why}")
    return lines


def render_markdown(report: EvalReport, max_rows: int = 200, sort_by: str | None = None) -> str:
    out = ["# rag_lab evaluation report", ""]
    meta = report.meta
    out.append(f"Created {meta.get('created_at')} · rag_lab {meta.get('rag_lab')} · Python {meta.get('python')}")
    if meta.get("config"):
        out.append(f" · config `{meta['config']}`")
    out.append("")
    out += review_markdown(report) + calibration_markdown(report)
    for suite in report.suites:
        out += [f"## {suite.name}", ""]
        params = ", ".join(f"{k}={v}" for k, v in sorted(suite.params.items())) or "lab defaults"
        out.append(
            f"Dataset `{suite.dataset}` ({len(suite.records)} queries; spec {json.dumps(suite.spec, sort_keys=True)}); "
            f"params: {params}. Mean latency {_fmt(suite.mean_latency_ms)} ms; {suite.fallbacks} fallback answers; "
            f"{suite.errors} pipeline errors; {len(suite.retrieval.excluded_queries)} queries excluded (no gold)."
        )
        led = suite.ledger_totals()
        calls = ", ".join(f"{n} {k}" for k, n in sorted(led["model_calls"].items())) or "none"
        out += [
            "",
            f"Ledger: model calls {calls}; {led['tokens_in']} tokens in, {led['tokens_out']} out; "
            f"cost ${led['cost_usd']:.4f}"
            + (f"; {led['judge_failed']} judge calls failed." if led["judge_failed"] else "."),
        ]
        out += ["", "| metric | mean | n | valid | NaN | failed |", "|---|---|---|---|---|---|"]
        out += [f"| {m} | {v} | {n} | {ok} | {nn} | {nf} |" for m, v, n, ok, nn, nf in _summary_rows(suite)]
        out += ["", saturation_line(suite.saturation()).replace("saturation:", "**Saturation:**", 1)]
        main = _main_metrics(suite)
        vals = suite.values()
        rows = _query_rows(suite, sort_by)
        order = f", sorted by {sort_by} (lowest first)" if sort_by else ""
        out += ["", f"### Per query (first {min(max_rows, len(rows))} of {len(rows)}{order})", ""]
        out.append(
            "| qid | question | answer | reference | gold titles | top contexts | "
            + " | ".join(main)
            + " | ms | error |"
        )
        out.append("|---" * (len(main) + 8) + "|")
        for r in rows[:max_rows]:
            cells = [_fmt(vals[m].get(r.qid, math.nan)) for m in main]
            out.append(
                f"| {r.qid} | {md_cell(short_text(r.question, 100))} | {md_cell(short_text(answer_text(r.answer), 140))} | "
                f"{md_cell(short_text(r.answers[0] if r.answers else '', 80))} | {md_cell(', '.join(_gold_titles(r)))} | "
                f"{md_cell(', '.join(_context_titles(r)[:3]))} | "
                + " | ".join(cells)
                + f" | {r.latency_ms:.0f} | {md_cell(r.error)} |"
            )
        out += repeats_markdown(suite, max_rows)
        out += funnel_markdown(suite, max_rows)
        fails = _failures(suite)
        out += ["", f"### NaN and failed samples ({len(fails)})", ""]
        out += [f"- {line}" for line in fails] or ["none"]
        out.append("")
    return "\n".join(out) + "\n"


def short_text(text: str, n: int) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis."""
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def md_cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _gold_titles(r: QueryRecord) -> list[str]:
    """Gold documents by title (their id where the record has no title)."""
    titles = list(r.gold_titles or [])
    return [t or g for g, t in zip(r.gold_ids, titles + [""] * len(r.gold_ids))]


def _context_titles(r: QueryRecord) -> list[str]:
    """The final contexts' document titles, each document once, in rank order (ids as fallback)."""
    ids = r.context_doc_ids or r.retrieved_doc_ids
    titles = list(r.context_titles or []) if r.context_doc_ids else []
    seen: list[str] = []
    for i, d in enumerate(ids):
        t = (titles[i] if i < len(titles) else "") or d
        if t not in seen:
            seen.append(t)
    return seen


def _query_rows(suite: SuiteResult, sort_by: str | None) -> list[QueryRecord]:
    """The suite's records, in dataset order or by ``sort_by`` ascending (worst first; NaN first)."""
    if not sort_by:
        return list(suite.records)
    vals = suite.values().get(sort_by)
    if vals is None:
        raise ValueError(
            f"sort_by={sort_by!r}: no such metric in suite {suite.name!r} ({', '.join(suite.metric_names())})"
        )

    def key(r: QueryRecord) -> tuple[float, str]:
        v = vals.get(r.qid, math.nan)
        return (v if math.isfinite(v) else -math.inf, r.qid)

    return sorted(suite.records, key=key)


def render_junit(report: EvalReport) -> str:
    """A ``<testsuites>`` document: one test case per (suite, metric)."""
    root = ET.Element("testsuites", name="rag_lab.eval")
    total = failures = 0
    for suite in report.suites:
        ts = ET.SubElement(root, "testsuite", name=suite.name)
        n_fail = 0
        summary, counts = suite.summary(), suite.counts()
        for m in [m for m in suite.metric_names() if not is_funnel_metric(m)]:
            tc = ET.SubElement(ts, "testcase", classname=f"rag_lab.eval.{suite.name}", name=m)
            c = counts[m]
            bad = c["n_nan"] + c["n_failed"]
            ET.SubElement(tc, "system-out").text = f"mean={_fmt(summary[m])} n={c['n']} valid={c['n_valid']}"
            if not math.isfinite(summary[m]) or bad:
                n_fail += 1
                f = ET.SubElement(
                    tc,
                    "failure",
                    message=f"{m}: mean {_fmt(summary[m])}; {c['n_nan']} NaN and "
                    f"{c['n_failed']} failed of {c['n']} samples",
                )
                reasons = suite.ragas.reasons.get(m, {}) if suite.ragas is not None else {}
                f.text = "\n".join(f"{q}: {why}" for q, why in reasons.items())
        ts.set("tests", str(len([m for m in suite.metric_names() if not is_funnel_metric(m)])))
        ts.set("failures", str(n_fail))
        ts.set("errors", "0")
        total += len([m for m in suite.metric_names() if not is_funnel_metric(m)])
        failures += n_fail
    root.set("tests", str(total))
    root.set("failures", str(failures))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def suites_table(suites: Sequence[SuiteResult], metrics: Sequence[str] | None = None) -> str:
    """A compact text table of suite means (for the terminal)."""
    lines = []
    for s in suites:
        summ, counts = s.summary(), s.counts()
        names = list(metrics) if metrics else [m for m in s.metric_names() if not is_funnel_metric(m)]
        lines.append(f"{s.name} ({len(s.records)} queries, {s.errors} errors, {s.fallbacks} fallbacks)")
        for m in names:
            if m not in summ:
                continue
            c = counts[m]
            extra = f"  ({c['n_nan']} NaN, {c['n_failed']} failed of {c['n']})" if c["n_nan"] or c["n_failed"] else ""
            lines.append(f"  {m:>26}: {_fmt(summ[m])}{extra}")
        if not metrics and any(is_funnel_metric(m) for m in summ):
            from rag_lab.eval.funnel import funnel_table

            lines.append("  gold funnel (document ranks at each stage):")
            lines += ["    " + line for line in funnel_table(summ).splitlines()]
    return "\n".join(lines)
