"""The one Jinja2 environment of the HTML pages: templates in ``templates/`` next to this module
(``base.html.j2`` holds the head every page shares), autoescaped, undefined names an error."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).with_name("templates")


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def render_page(template: str, **context: object) -> str:
    """``template`` (a file name under ``templates/``) rendered with ``context``."""
    return environment().get_template(template).render(**context)


def num_cell(v: object, fmt: str = "{:.4f}", missing: str = "NaN") -> dict[str, str]:
    """A sortable numeric cell (``macros.html.j2``'s ``num``): its sort key (NaN sorts last) and
    its text; ``missing`` is the text of a value that is not a finite number."""
    if isinstance(v, (int, float)) and math.isfinite(v):
        return {"key": repr(float(v)), "text": fmt.format(v)}
    return {"key": "NaN", "text": missing}
