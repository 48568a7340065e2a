"""Every committed notebook cell that draws a picture has the picture in its outputs.

The notebooks lane runs the notebooks but does not compare outputs, so a figure that shows
as the text ``<Figure size 1100x1470 with 2 Axes>`` passes it. This test reads the committed
notebooks (``notebooks/build_notebooks.py`` writes them from a fresh execution) and fails on any
plotting cell without an ``image/png`` output, and on any such Figure text anywhere."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
#: a cell plots when it calls one of the workbench's plot functions or shows an image
PLOTS = re.compile(r"\bplot_(?:composite_scores|mmr|fusion|merge|stage_timings)\(|\bImage\(")
FIGURE_TEXT = re.compile(r"<(?:matplotlib\.figure\.)?\w*Figure size \d+x\d+ with \d+ Axes>")


def _outputs(cell) -> list[dict]:
    return list(cell.get("outputs") or [])


def _has_png(cell) -> bool:
    return any("image/png" in (o.get("data") or {}) for o in _outputs(cell))


def _texts(cell) -> list[str]:
    """Text of the outputs that carry no picture (a PNG output keeps a text/plain fallback)."""
    out = []
    for o in _outputs(cell):
        data = o.get("data") or {}
        if "image/png" in data:
            continue
        out.append(str(o.get("text", "")))
        out.append(str(data.get("text/plain", "")))
    return out


def test_the_notebooks_are_there():
    assert len(NOTEBOOKS) >= 9


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_plotting_cell_has_a_png(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.get("execution_count") for c in code), f"{path.name}: not executed (run build_notebooks.py)"
    missing = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and PLOTS.search(c.source) and not _has_png(c)
    ]
    assert missing == [], f"{path.name}: cells {missing} plot but have no image/png output"
    as_text = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and any(FIGURE_TEXT.search(t) for t in _texts(c))
    ]
    assert as_text == [], f"{path.name}: cells {as_text} show a Figure as text instead of a picture"


def test_the_plotting_notebooks_commit_pictures():
    """The notebooks the issue names (00, 02, 03, 04) and the tour each carry at least one PNG."""
    with_png = {p.stem[:2] for p in NOTEBOOKS if any(_has_png(c) for c in nbformat.read(p, as_version=4).cells)}
    assert {"00", "02", "03", "04", "08"} <= with_png
