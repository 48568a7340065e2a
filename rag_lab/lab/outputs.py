"""The files the evaluation commands write, each set whole: a report (Markdown, HTML page, JSON,
JUnit), a gate result (the same four), a threshold calibration (JSON, Markdown, PNG) and a sweep
(CSV, PNG plots, best-config YAML, Markdown). The text formats come from :mod:`rag_lab.eval`; the
pages (:mod:`rag_lab.lab.pages`) and figures (:mod:`rag_lab.lab.plots.evaluation`) are drawn here,
in the drawing layer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.cliutil import check_file_stem
from rag_lab.eval.report import FORMATS, EvalReport, render_junit, render_markdown
from rag_lab.lab.pages import gate_html, report_html

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.calibration import Calibration
    from rag_lab.eval.gate import GateResult
    from rag_lab.eval.sweep.outputs import SweepResult

__all__ = ["write_calibration", "write_gate", "write_report", "write_sweep_outputs"]


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
            p, text = out / f"{name}.html", report_html(report, plots=plots, sort_by=sort_by)
        elif f == "json":
            p, text = out / f"{name}.json", report.to_json(include_texts)
        else:
            p, text = out / f"{name}.junit.xml", render_junit(report)
        p.write_text(text, encoding="utf-8")
        paths[f] = p
    return paths


def write_gate(result: GateResult, out_dir: str | Path) -> dict[str, Path]:
    """``gate.json``, ``gate.md``, ``gate.html`` and ``gate.junit.xml`` under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "gate.json",
        "md": out / "gate.md",
        "html": out / "gate.html",
        "junit": out / "gate.junit.xml",
    }
    paths["json"].write_text(result.to_json(), encoding="utf-8")
    paths["md"].write_text(result.markdown(), encoding="utf-8")
    paths["html"].write_text(gate_html(result), encoding="utf-8")
    paths["junit"].write_text(result.junit(), encoding="utf-8")
    return paths


def write_calibration(cal: Calibration, out_dir: str | Path, name: str) -> dict[str, Path]:
    """``<name>.json``, ``<name>.md`` and ``<name>.png`` under ``out_dir``."""
    from rag_lab.lab.plots.evaluation import calibration_png

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / f"{name}.json", "md": out / f"{name}.md", "png": out / f"{name}.png"}
    paths["json"].write_text(json.dumps(cal.to_dict(), indent=1, allow_nan=False), encoding="utf-8")
    paths["png"].write_bytes(calibration_png(cal))
    paths["md"].write_text(cal.markdown() + f"\n![calibration]({paths['png'].name})\n", encoding="utf-8")
    return paths


def write_sweep_outputs(result: SweepResult, out_dir: str | Path, name: str = "sweep") -> dict[str, Path]:
    """CSV, metric-vs-param and Pareto PNGs, best-config YAML and a Markdown summary under
    ``out_dir``; ``name`` must be a file name, not a path (:class:`ValueError` otherwise). After a
    held-out check whose verdict is not ``better``, ``<name>_best.yaml`` holds the default config
    and the tuned one goes to ``<name>_tuned.yaml``."""
    from rag_lab.lab.plots.evaluation import plot_metric_vs_param, plot_pareto

    check_file_stem(name)
    out = Path(out_dir)
    paths = {
        "csv": result.to_csv(out / f"{name}.csv"),
        "metric_vs_param": plot_metric_vs_param(result, out / f"{name}_metric_vs_param.png"),
        "pareto": plot_pareto(result, out / f"{name}_pareto.png"),
    }
    applies = not result.holdout or result.holdout.get("verdict") == "better"
    paths["best_yaml"] = result.export_best_yaml(out / f"{name}_best.yaml", tuned=applies)
    if not applies:
        paths["tuned_yaml"] = result.export_best_yaml(out / f"{name}_tuned.yaml")
    if result.holdout:
        ho = out / f"{name}_holdout.json"
        body = {k: v for k, v in result.holdout.items() if k != "markdown"}
        ho.write_text(json.dumps(body, indent=1, default=float), encoding="utf-8")
        paths["holdout"] = ho
    md = out / f"{name}.md"
    md.write_text(
        result.markdown() + f"\n![metric vs parameter]({paths['metric_vs_param'].name})\n\n"
        f"![Pareto]({paths['pareto'].name})\n",
        encoding="utf-8",
    )
    paths["md"] = md
    return paths
