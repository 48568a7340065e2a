"""Evaluation reports: one :class:`EvalReport` (suites = datasets evaluated with one config) written
as Markdown, HTML (plots embedded as base64 PNG), JSON and JUnit XML.

Every metric is reported with its mean over the valid samples **and** the counts ``n``,
``n_valid``, ``n_nan`` and ``n_failed``; failed samples are listed with their reasons. A JUnit
test case per (suite, metric) fails when the mean is NaN or any sample is NaN / failed, so a CI
dashboard shows them instead of averaging them away.

The JSON holds everything needed to re-render the other formats and to run the gate (per-query
values of every metric, retrieved document ids, answers, latencies, errors) but not the context
texts unless asked (``include_texts=True``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import json
import math
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree as ET

import rag_lab
from rag_lab.eval.metrics import RetrievalReport
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.records import QueryRecord, answer_text

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "EvalReport",
    "REPORT_FORMAT",
    "ReportError",
    "SuiteResult",
    "load_report",
    "plot_png",
    "write_report",
]

REPORT_FORMAT = 1
FORMATS = ("md", "html", "json", "junit")


class ReportError(ValueError):
    """A report file is missing, unreadable or of another format."""


def _nan_to_none(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _none_to_nan(v: Any) -> float:
    return math.nan if v is None else float(v)


@dataclass
class SuiteResult:
    """One dataset evaluated with one config."""

    name: str
    dataset: str
    kb: str
    spec: dict[str, Any]
    params: dict[str, Any]
    retrieval: RetrievalReport
    records: list[QueryRecord]
    ragas: RagasResult | None = None
    seconds: float = 0.0

    # -- metric access ------------------------------------------------------------------------
    @property
    def qids(self) -> list[str]:
        return [r.qid for r in self.records]

    def metric_names(self) -> list[str]:
        names = list(self.retrieval.metric_names)
        if self.ragas is not None:
            names += list(self.ragas.metrics)
        return names

    def values(self) -> dict[str, dict[str, float]]:
        """``{metric: {qid: value}}`` for every metric (retrieval rows; ragas values, NaN kept)."""
        out: dict[str, dict[str, float]] = {m: {} for m in self.metric_names()}
        for row in self.retrieval.rows:
            for m in self.retrieval.metric_names:
                out[m][str(row["qid"])] = float(row[m])
        if self.ragas is not None:
            for m in self.ragas.metrics:
                out[m] = dict(zip(self.ragas.qids, self.ragas.values[m]))
        return out

    def summary(self) -> dict[str, float]:
        s = dict(self.retrieval.summary())
        if self.ragas is not None:
            s.update(self.ragas.summary())
        return s

    def counts(self) -> dict[str, dict[str, int]]:
        n = self.retrieval.n_queries
        out = {m: {"n": n, "n_valid": n, "n_nan": 0, "n_failed": 0} for m in self.retrieval.metric_names}
        if self.ragas is not None:
            out.update(self.ragas.counts())
        return out

    @property
    def mean_latency_ms(self) -> float:
        lat = [r.latency_ms for r in self.records if not r.error]
        return sum(lat) / len(lat) if lat else math.nan

    def ledger_totals(self) -> dict[str, Any]:
        """Model calls per kind, tokens and cost summed over the questions, plus the LLM judge's
        calls (every attempt, kind ``judge``; ``judge_failed`` of them failed)."""
        calls: dict[str, int] = {}
        for r in self.records:
            for k, v in (r.model_calls or {}).items():
                calls[k] = calls.get(k, 0) + int(v)
        judge = (self.ragas.judge if self.ragas is not None else None) or {}
        if judge.get("calls"):
            calls["judge"] = calls.get("judge", 0) + int(judge["calls"])
        return {
            "model_calls": calls,
            "tokens_in": sum(r.tokens_in for r in self.records) + int(judge.get("tokens_in", 0)),
            "tokens_out": sum(r.tokens_out for r in self.records) + int(judge.get("tokens_out", 0)),
            "cost_usd": sum(r.cost_usd for r in self.records) + float(judge.get("cost_usd", 0.0)),
            "judge_failed": int(judge.get("failed", 0)),
        }

    @property
    def errors(self) -> int:
        return sum(1 for r in self.records if r.error)

    @property
    def fallbacks(self) -> int:
        return sum(1 for r in self.records if r.is_fallback)

    def per_query(self) -> pd.DataFrame:
        """One row per query: every metric, latency, error."""
        import pandas as pd

        vals = self.values()
        df = pd.DataFrame(
            {m: [vals[m].get(q, math.nan) for q in self.qids] for m in vals}, index=pd.Index(self.qids, name="qid")
        )
        df["latency_ms"] = [r.latency_ms for r in self.records]
        df["error"] = [r.error for r in self.records]
        return df

    # -- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self, include_texts: bool = False) -> dict[str, Any]:
        records = []
        for r in self.records:
            d = r.to_dict()
            if not include_texts:
                d.pop("contexts", None)
            records.append(d)
        return {
            "name": self.name,
            "dataset": self.dataset,
            "kb": self.kb,
            "spec": self.spec,
            "params": self.params,
            "seconds": round(self.seconds, 3),
            "summary": {k: _nan_to_none(v) for k, v in self.summary().items()},
            "counts": self.counts(),
            "retrieval": {
                "ks": list(self.retrieval.ks),
                "rows": self.retrieval.rows,
                "excluded_queries": list(self.retrieval.excluded_queries),
            },
            "ragas": None
            if self.ragas is None
            else {
                **self.ragas.to_dict(),
                "values": {m: [_nan_to_none(v) for v in vs] for m, vs in self.ragas.values.items()},
            },
            "records": records,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteResult:
        rt = d["retrieval"]
        rag = d.get("ragas")
        ragas = None
        if rag:
            rag = dict(rag)
            rag["values"] = {m: [_none_to_nan(v) for v in vs] for m, vs in rag["values"].items()}
            ragas = RagasResult.from_dict(rag)
        return cls(
            name=d["name"],
            dataset=d["dataset"],
            kb=d.get("kb", ""),
            spec=dict(d.get("spec") or {}),
            params=dict(d.get("params") or {}),
            retrieval=RetrievalReport(
                ks=tuple(rt["ks"]),
                rows=[dict(r) for r in rt["rows"]],
                excluded_queries=list(rt.get("excluded_queries") or []),
            ),
            records=[QueryRecord.from_dict(r) for r in d.get("records") or []],
            ragas=ragas,
            seconds=float(d.get("seconds") or 0.0),
        )


@dataclass
class EvalReport:
    """Suites plus run metadata (versions, config, the spec that produced it)."""

    suites: list[SuiteResult]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.meta.setdefault("created_at", _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
        self.meta.setdefault("rag_lab", rag_lab.__version__)
        self.meta.setdefault("python", platform.python_version())

    def suite(self, name: str) -> SuiteResult:
        for s in self.suites:
            if s.name == name:
                return s
        raise KeyError(f"no suite {name!r} in this report (suites: {', '.join(s.name for s in self.suites)})")

    def to_dict(self, include_texts: bool = False) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "kind": "rag_lab.eval.report",
            "meta": self.meta,
            "suites": [s.to_dict(include_texts) for s in self.suites],
        }

    def to_json(self, include_texts: bool = False) -> str:
        return json.dumps(self.to_dict(include_texts), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<report>") -> EvalReport:
        if not isinstance(d, Mapping) or d.get("kind") != "rag_lab.eval.report":
            raise ReportError(f"{source}: not a rag_lab evaluation report (missing kind 'rag_lab.eval.report')")
        if d.get("format") != REPORT_FORMAT:
            raise ReportError(f"{source}: report format {d.get('format')!r}, this rag_lab reads {REPORT_FORMAT}")
        try:
            return cls([SuiteResult.from_dict(s) for s in d["suites"]], dict(d.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{source}: malformed report: {type(exc).__name__}: {exc}") from None


def load_report(path: str | Path) -> EvalReport:
    """Read a report JSON (as written by :func:`write_report`)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{p}: file not found") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{p}: cannot read report JSON: {exc}") from None
    return EvalReport.from_dict(data, source=str(p))


# --------------------------------------------------------------------------- plots


def _figure(width: float = 7.0, height: float = 3.6) -> Any:
    """A matplotlib Figure on the Agg canvas (no pyplot, no global backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def plot_png(suite: SuiteResult) -> bytes:
    """Retrieval metrics vs k, and the per-query nDCG distribution, as one PNG."""
    fig = _figure(9.0, 3.4)
    ax1, ax2 = fig.subplots(1, 2)
    s = suite.summary()
    ks = list(suite.retrieval.ks)
    for prefix in ("recall", "precision", "hit", "ndcg"):
        ax1.plot(ks, [s[f"{prefix}@{k}"] for k in ks], marker="o", label=prefix)
    ax1.set_xlabel("k")
    ax1.set_ylim(0, 1.02)
    ax1.set_title(f"{suite.name}: metrics@k")
    ax1.legend(fontsize=8)
    kmax = max(ks)
    vals = [float(r[f"ndcg@{kmax}"]) for r in suite.retrieval.rows]
    ax2.hist(vals, bins=[i / 10 for i in range(11)], color="#4477aa")
    ax2.set_xlabel(f"nDCG@{kmax} per query")
    ax2.set_ylabel("queries")
    ax2.set_title(f"{len(vals)} queries")
    return _png(fig)


def plot_ragas_png(suite: SuiteResult) -> bytes | None:
    """ragas means as bars, annotated with NaN / failed counts."""
    if suite.ragas is None or not suite.ragas.metrics:
        return None
    fig = _figure(8.0, 3.2)
    ax = fig.subplots()
    summ, counts = suite.ragas.summary(), suite.ragas.counts()
    names = suite.ragas.metrics
    means = [summ[m] if math.isfinite(summ[m]) else 0.0 for m in names]
    ax.bar(range(len(names)), means, color="#66aa55")
    for i, m in enumerate(names):
        c = counts[m]
        bad = c["n_nan"] + c["n_failed"]
        label = f"{summ[m]:.3f}" if math.isfinite(summ[m]) else "NaN"
        if bad:
            label += f"\n{bad}/{c['n']} NaN"
        ax.text(i, means[i] + 0.02, label, ha="center", fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.2)
    ax.set_title(f"{suite.name}: ragas metrics (mean over valid samples)")
    return _png(fig)


# --------------------------------------------------------------------------- renderers


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "NaN" if not math.isfinite(v) else f"{v:.4f}"
    return str(v)


def _summary_rows(suite: SuiteResult) -> list[tuple[str, str, int, int, int, int]]:
    s, c = suite.summary(), suite.counts()
    return [(m, _fmt(s[m]), c[m]["n"], c[m]["n_valid"], c[m]["n_nan"], c[m]["n_failed"]) for m in suite.metric_names()]


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
        for m in suite.metric_names():
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
        ts.set("tests", str(len(suite.metric_names())))
        ts.set("failures", str(n_fail))
        ts.set("errors", "0")
        total += len(suite.metric_names())
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
    """Write ``<name>.md``, ``<name>.html``, ``<name>.json`` and ``<name>.junit.xml`` (those asked)."""
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
        names = list(metrics) if metrics else s.metric_names()
        lines.append(f"{s.name} ({len(s.records)} queries, {s.errors} errors, {s.fallbacks} fallbacks)")
        for m in names:
            if m not in summ:
                continue
            c = counts[m]
            extra = f"  ({c['n_nan']} NaN, {c['n_failed']} failed of {c['n']})" if c["n_nan"] or c["n_failed"] else ""
            lines.append(f"  {m:>26}: {_fmt(summ[m])}{extra}")
    return "\n".join(lines)
