"""Evaluation reports: one :class:`EvalReport` (suites = datasets evaluated with one config) as
Markdown, JSON and JUnit XML; the HTML page (plots embedded as base64 PNG) is drawn above this
package (:mod:`rag_lab.lab.pages`) and :func:`rag_lab.lab.outputs.write_report` writes all four.

Every metric is reported with its mean over the valid samples **and** the counts ``n``,
``n_valid``, ``n_nan`` and ``n_failed``; failed samples are listed with their reasons. A JUnit
test case per (suite, metric) fails when the mean is NaN or any sample is NaN / failed, so a CI
dashboard shows them instead of averaging them away.

The JSON holds everything needed to re-render the other formats and to run the gate (per-query
values of every metric, retrieved document ids, answers, latencies, errors) but not the context
texts unless asked (``include_texts=True``).

The package is split by responsibility: :mod:`.model` (:class:`SuiteResult`, :class:`EvalReport`,
the JSON form and :func:`load_report`), :mod:`.render` (Markdown, JUnit and the terminal table),
:mod:`.schema` (the checks every report passes before it is read or compared).
"""

from __future__ import annotations

from rag_lab.eval.report.model import FORMATS, REPORT_FORMAT, EvalReport, SuiteResult, load_report
from rag_lab.eval.report.render import md_cell, render_junit, render_markdown, short_text, suites_table
from rag_lab.eval.report.schema import ReportError, ReportSchemaError, validate_report, validate_report_data

__all__ = [
    "EvalReport",
    "REPORT_FORMAT",
    "ReportError",
    "ReportSchemaError",
    "SuiteResult",
    "load_report",
    "validate_report",
    "validate_report_data",
    # used by the CLI, the gate's views and the tests
    "FORMATS",
    "md_cell",
    "render_junit",
    "render_markdown",
    "short_text",
    "suites_table",
]
