"""Reading documents for ingestion: the supported file types, HTML to text with the stdlib parser
(``script`` / ``style`` dropped, block elements as line breaks, the ``<title>``), the Markdown
title, and :func:`read_document` (UTF-8 only; unreadable files raise :class:`IngestError`)."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

from rag_lab.knowledge.ingest_common import IngestError
from rag_lab.searchutil.text import markdown_title

SUPPORTED_SUFFIXES = {".txt": "txt", ".md": "md", ".markdown": "md", ".html": "html", ".htm": "html"}
_WS = re.compile(r"\s+")


class _HTMLText(HTMLParser):
    _SKIP = {"script", "style", "noscript", "template"}
    _BLOCK = {
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "pre",
        "blockquote",
        "hr",
        "title",
        "dt",
        "dd",
    }

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._skip = 0
        self._pre = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag == "pre":
            self._pre += 1
        elif tag == "title":
            self._in_title = True
        if tag in self._BLOCK:
            self.parts.append("\n\n" if tag in ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6") else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag == "pre" and self._pre:
            self._pre -= 1
        elif tag == "title":
            self._in_title = False
        if tag in self._BLOCK:
            self.parts.append("\n\n" if tag in ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6") else "\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title_parts.append(data)
            return
        # outside <pre>, a run of whitespace (newlines included) is one space, as a browser shows it
        self.parts.append(data if self._pre else _WS.sub(" ", data))


def html_to_text(source: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML page: text content with block elements as line breaks,
    ``script``/``style``/``noscript`` dropped, whitespace collapsed outside ``<pre>``, lines
    trimmed, at most one blank line in a row."""
    p = _HTMLText()
    p.feed(source)
    p.close()
    text = "\n".join(line.strip() for line in "".join(p.parts).splitlines())
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    title = " ".join(html.unescape("".join(p.title_parts)).split())
    return title, text.strip()


def read_document(path: str | Path) -> tuple[str, str]:
    """``(title, text)`` of a supported file; unreadable or non-UTF-8 files raise IngestError."""
    p = Path(path)
    kind = SUPPORTED_SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise IngestError(f"{p}: unsupported file type {p.suffix!r} (supported: {sorted(SUPPORTED_SUFFIXES)})")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise IngestError(f"{p}: cannot read file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(f"{p}: not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if kind == "html":
        title, body = html_to_text(text)
        return title or p.stem, body
    if kind == "md":
        return markdown_title(text) or p.stem, text
    return p.stem, text
