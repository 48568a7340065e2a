"""HTML escaping helpers used by the model-context renderers (spec §0).

Go's ``html.EscapeString`` escapes exactly five characters and spells the quotes
``&#39;`` / ``&#34;``; Python's :func:`html.escape` differs, so it is not used.
"""

from __future__ import annotations

import html

from rag_lab.searchutil.text import html_escape5

_TEXT_TABLE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def escape_attr(value: str) -> str:
    """The 5-character HTML escape (``& ' < > "``), used for attribute values."""
    return html_escape5(value)


def escape_text(value: str) -> str:
    """The narrower text escape (``& < >`` only), used for element text."""
    return value.translate(_TEXT_TABLE)


def unescape(value: str) -> str:
    """Unescape every standard HTML entity."""
    return html.unescape(value)
