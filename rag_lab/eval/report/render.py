"""The report's views: Markdown, HTML (plots embedded as base64 PNG, sortable per-query table),
JUnit XML (one test case per suite and metric), the terminal table of suite means, and
:func:`write_report`. The HTML pieces (:data:`CSS`, :data:`SORT_SCRIPT`, :func:`short_text`,
:func:`md_cell`) are shared with the gate's views."""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from rag_lab.eval.records import QueryRecord, answer_text
from rag_lab.eval.report.funnel_render import funnel_html, funnel_markdown, is_funnel_metric
from rag_lab.eval.report.judge_render import calibration_markdown, repeats_markdown, review_markdown
from rag_lab.eval.report.model import FORMATS, EvalReport, SuiteResult
from rag_lab.eval.report.plots import plot_png, plot_ragas_png
from rag_lab.eval.saturation import saturation_line


def _fmt(v: Any) -> str:
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


def _img(png: bytes | None, alt: str) -> str:
    if not png:
        return ""
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}"/>'


CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px;vertical-align:top}th{background:#eee}"
    ".bad{background:#fdd}.worse{color:#a00}.better{color:#070}img{max-width:100%}"
    "table.sortable th{cursor:pointer}table.sortable th[data-dir=asc]:after{content:' ▲'}"
    "table.sortable th[data-dir=desc]:after{content:' ▼'}"
)
_CSS = CSS

#: click a header of a ``table.sortable`` to sort its body by that column (numbers by ``data-v``)
SORT_SCRIPT = """<script>
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('thead th').forEach(function (th) {
    th.addEventListener('click', function () {
      var col = th.cellIndex, body = table.tBodies[0], asc = th.dataset.dir !== 'asc';
      table.querySelectorAll('thead th').forEach(function (h) { delete h.dataset.dir; });
      th.dataset.dir = asc ? 'asc' : 'desc';
      var key = function (row) {
        var cell = row.cells[col];
        return cell.dataset.v !== undefined ? parseFloat(cell.dataset.v) : cell.textContent.trim();
      };
      Array.from(body.rows).sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = (typeof x === 'number' && typeof y === 'number')
          ? ((isNaN(x) ? Infinity : x) - (isNaN(y) ? Infinity : y)) : String(x).localeCompare(String(y));
        return asc ? c : -c;
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
</script>"""


def _num_td(v: Any, fmt: str = "{:.4f}") -> str:
    """A numeric cell whose sort key is its value (NaN sorts last)."""
    if isinstance(v, (int, float)) and math.isfinite(v):
        return f"<td data-v='{float(v)!r}'>{fmt.format(v)}</td>"
    return "<td data-v='NaN'>NaN</td>"


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


def render_html(report: EvalReport, max_rows: int = 200, plots: bool = True, sort_by: str | None = None) -> str:
    e = html.escape
    meta = report.meta
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>rag_lab evaluation report</title>",
        f"<style>{_CSS}</style></head><body><h1>rag_lab evaluation report</h1>",
        f"<p>Created {e(str(meta.get('created_at')))} · rag_lab {e(str(meta.get('rag_lab')))} · "
        f"Python {e(str(meta.get('python')))}</p>",
    ]
    for suite in report.suites:
        params = ", ".join(f"{k}={v}" for k, v in sorted(suite.params.items())) or "lab defaults"
        parts.append(
            f"<h2>{e(suite.name)}</h2><p>Dataset <code>{e(suite.dataset)}</code>, {len(suite.records)} queries; "
            f"params: {e(params)}; mean latency {e(_fmt(suite.mean_latency_ms))} ms; "
            f"{suite.fallbacks} fallback answers; {suite.errors} pipeline errors.</p>"
        )
        led = suite.ledger_totals()
        calls = ", ".join(f"{n} {k}" for k, n in sorted(led["model_calls"].items())) or "none"
        parts.append(
            f"<p>Ledger: model calls {e(calls)}; {led['tokens_in']} tokens in, {led['tokens_out']} out; "
            f"cost ${led['cost_usd']:.4f}"
            + (f"; {led['judge_failed']} judge calls failed" if led["judge_failed"] else "")
            + ".</p>"
        )
        if plots:
            parts.append(_img(plot_png(suite), f"{suite.name} retrieval metrics"))
            parts.append(_img(plot_ragas_png(suite), f"{suite.name} ragas metrics"))
        parts.append("<table><tr><th>metric</th><th>mean</th><th>n</th><th>valid</th><th>NaN</th><th>failed</th></tr>")
        for m, v, n, ok, nn, nf in _summary_rows(suite):
            cls = " class='bad'" if (nn or nf or v == "NaN") else ""
            parts.append(
                f"<tr{cls}><td>{e(m)}</td><td>{v}</td><td>{n}</td><td>{ok}</td><td>{nn}</td><td>{nf}</td></tr>"
            )
        parts.append("</table>")
        main = _main_metrics(suite)
        vals = suite.values()
        rows = _query_rows(suite, sort_by)
        parts.append(
            f"<h3>Per query ({min(max_rows, len(rows))} of {len(rows)}; click a column to sort)</h3>"
            "<table class='sortable'><thead><tr><th>qid</th><th>question</th><th>answer</th><th>reference</th>"
            "<th>gold titles</th><th>top contexts</th>"
            + "".join(f"<th>{e(m)}</th>" for m in main)
            + "<th>ms</th><th>error</th></tr></thead><tbody>"
        )
        for r in rows[:max_rows]:
            cls = " class='bad'" if r.error else ""
            ctx = _context_titles(r)
            parts.append(
                f"<tr{cls}><td>{e(r.qid)}</td><td>{e(r.question)}</td>"
                f"<td title='{e(r.answer)}'>{e(short_text(answer_text(r.answer), 300))}</td>"
                f"<td>{e(r.answers[0] if r.answers else '')}</td>"
                f"<td>{e(', '.join(_gold_titles(r)))}</td><td>{e(', '.join(ctx[:5]))}</td>"
                + "".join(_num_td(vals[m].get(r.qid, math.nan)) for m in main)
                + f"{_num_td(r.latency_ms, '{:.0f}')}<td>{e(r.error)}</td></tr>"
            )
        parts.append("</tbody></table>")
        parts.append(funnel_html(suite, max_rows))
        fails = _failures(suite)
        parts.append(
            f"<h3>NaN and failed samples ({len(fails)})</h3><ul>" + "".join(f"<li>{e(x)}</li>" for x in fails) + "</ul>"
        )
    parts.append(SORT_SCRIPT + "</body></html>")
    return "\n".join(parts) + "\n"


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


def write_report(
    report: EvalReport,
    out_dir: str | Path = "reports",
    name: str = "report",
    formats: Iterable[str] = FORMATS,
    include_texts: bool = False,
    plots: bool = True,
    sort_by: str | None = None,
) -> dict[str, Path]:
    """Write ``<name>.md``, ``<name>.html``, ``<name>.json`` and ``<name>.junit.xml`` (those asked)
    under ``out_dir``; ``name`` must be a file name, not a path (:class:`ValueError` otherwise)."""
    from rag_lab.cliutil import check_file_stem

    check_file_stem(name)
    fmts = list(dict.fromkeys(formats))
    unknown = [f for f in fmts if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for f in fmts:
        if f == "md":
            p, text = out / f"{name}.md", render_markdown(report, sort_by=sort_by)
        elif f == "html":
            p, text = out / f"{name}.html", render_html(report, plots=plots, sort_by=sort_by)
        elif f == "json":
            p, text = out / f"{name}.json", report.to_json(include_texts)
        else:
            p, text = out / f"{name}.junit.xml", render_junit(report)
        p.write_text(text, encoding="utf-8")
        paths[f] = p
    return paths


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
