"""The evaluation report's HTML page (``report.html.j2``): per suite the ledger, the figures
(base64 PNG), the summary table, the sortable per-query table, the gold funnel and the NaN and
failed samples. The numbers and texts come from :mod:`rag_lab.eval.report`, as in the Markdown."""

from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING

from rag_lab.eval.records import answer_text
from rag_lab.eval.report.funnel_render import funnel_tables
from rag_lab.eval.report.render import (
    _context_titles,
    _failures,
    _fmt,
    _gold_titles,
    _main_metrics,
    _query_rows,
    _summary_rows,
    short_text,
)
from rag_lab.lab.pages.render import num_cell, render_page

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.records import QueryRecord
    from rag_lab.eval.report.model import EvalReport, SuiteResult

__all__ = ["report_html"]


def _images(suite: SuiteResult) -> list[dict[str, str]]:
    from rag_lab.lab.plots.evaluation import plot_png, plot_ragas_png

    out = []
    for png, alt in ((plot_png(suite), "retrieval metrics"), (plot_ragas_png(suite), "ragas metrics")):
        if png:
            out.append({"alt": f"{suite.name} {alt}", "base64": base64.b64encode(png).decode()})
    return out


def _row(r: QueryRecord, main: list[str], vals: dict[str, dict[str, float]]) -> dict[str, object]:
    return {
        "qid": r.qid,
        "question": r.question,
        "answer": r.answer,
        "answer_short": short_text(answer_text(r.answer), 300),
        "reference": r.answers[0] if r.answers else "",
        "gold": ", ".join(_gold_titles(r)),
        "contexts": ", ".join(_context_titles(r)[:5]),
        "cells": [num_cell(vals[m].get(r.qid, math.nan)) for m in main],
        "latency": num_cell(r.latency_ms, "{:.0f}"),
        "error": r.error,
    }


def _suite(suite: SuiteResult, max_rows: int, plots: bool, sort_by: str | None) -> dict[str, object]:
    led = suite.ledger_totals()
    main = _main_metrics(suite)
    vals = suite.values()
    rows = _query_rows(suite, sort_by)
    funnel = funnel_tables(suite)
    return {
        "name": suite.name,
        "dataset": suite.dataset,
        "n_queries": len(suite.records),
        "params": ", ".join(f"{k}={v}" for k, v in sorted(suite.params.items())) or "lab defaults",
        "latency": _fmt(suite.mean_latency_ms),
        "fallbacks": suite.fallbacks,
        "errors": suite.errors,
        "calls": ", ".join(f"{n} {k}" for k, n in sorted(led["model_calls"].items())) or "none",
        "tokens_in": led["tokens_in"],
        "tokens_out": led["tokens_out"],
        "cost": f"{led['cost_usd']:.4f}",
        "judge_failed": led["judge_failed"],
        "images": _images(suite) if plots else [],
        "summary": [
            {"metric": m, "mean": v, "n": n, "valid": ok, "nan": nn, "failed": nf, "bad": bool(nn or nf or v == "NaN")}
            for m, v, n, ok, nn, nf in _summary_rows(suite)
        ],
        "main": main,
        "n_rows": len(rows),
        "rows": [_row(r, main, vals) for r in rows[:max_rows]],
        "funnel": None if funnel is None else {**funnel, "max_rows": max_rows},
        "failures": _failures(suite),
    }


def report_html(report: EvalReport, max_rows: int = 200, plots: bool = True, sort_by: str | None = None) -> str:
    """The report as one self-contained HTML page (figures embedded unless ``plots`` is false;
    per-query rows in dataset order or by ``sort_by``, worst first)."""
    meta = report.meta
    return render_page(
        "report.html.j2",
        meta={k: str(meta.get(k)) for k in ("created_at", "rag_lab", "python")},
        suites=[_suite(s, max_rows, plots, sort_by) for s in report.suites],
    )
