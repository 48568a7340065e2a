"""The HTML pages come from one set of Jinja2 templates, autoescaped, shipped with the package."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rag_lab.lab.pages.render import TEMPLATES, environment, num_cell, render_page

ROOT = Path(__file__).resolve().parents[2]


def test_every_page_extends_the_shared_base() -> None:
    pages = sorted(p.name for p in TEMPLATES.glob("*.html.j2") if p.name not in {"base.html.j2", "macros.html.j2"})
    assert pages == ["funnel.html.j2", "gate.html.j2", "replay.html.j2", "report.html.j2", "runs.html.j2"]
    for name in pages:
        text = (TEMPLATES / name).read_text(encoding="utf-8")
        assert name == "funnel.html.j2" or text.startswith('{% extends "base.html.j2" %}'), name


def test_pages_are_autoescaped_and_undefined_names_fail() -> None:
    assert environment().autoescape is True
    page = render_page("runs.html.j2", runs=[], rows=[("<s>", "m", ["1"])], params=[], gate_table=None)
    assert "&lt;s&gt;" in page and "<s>" not in page
    with pytest.raises(Exception, match="undefined"):
        render_page("runs.html.j2")


def test_num_cell_sorts_nan_last() -> None:
    assert num_cell(0.5) == {"key": "0.5", "text": "0.5000"}
    assert num_cell(float("nan")) == {"key": "NaN", "text": "NaN"}
    assert num_cell(12.4, "{:.0f}") == {"key": "12.4", "text": "12"}


def test_the_templates_ship_as_package_data() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = data["tool"]["setuptools"]["package-data"]["rag_lab"]
    rel = TEMPLATES.relative_to(ROOT / "rag_lab").as_posix()
    assert f"{rel}/*" in patterns
    deps = data["project"]["dependencies"]
    assert any(d.startswith("jinja2") for d in deps)
