"""The HTML pages, rendered from one set of Jinja2 templates (``templates/*.html.j2`` over a shared
``base.html.j2``): the evaluation report (:func:`report_html`), the regression gate
(:func:`gate_html`), runs side by side (:func:`runs_html`) and the standalone replay of a capture
(:func:`export_replay_html`). :mod:`rag_lab.lab.outputs` writes them with the other formats."""

from __future__ import annotations

from rag_lab.lab.pages.gate import gate_html
from rag_lab.lab.pages.replay import export_replay_html, replay_page_data
from rag_lab.lab.pages.report import report_html
from rag_lab.lab.pages.runs import runs_html

__all__ = ["export_replay_html", "gate_html", "replay_page_data", "report_html", "runs_html"]
