"""Reading saved web pages for :class:`~rag_lab.web.providers.LocalFolderProvider`: the front
matter block, the HTML canonical link, the Markdown title, dates and URLs checked with errors that
name the page, :class:`LocalPage`, and the query-term snippet window (:func:`best_snippet`);
plus :class:`WebSearchError`, what every provider raises."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from datetime import time as dtime
from urllib.parse import urlsplit


class WebSearchError(RuntimeError):
    """A provider could not answer; the message names the folder / URL and the cause."""


# -- snippets --------------------------------------------------------------------------------
_HAN_ONLY = re.compile("^[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]+$")
_MAX_OCCURRENCES = 2000


def _term_pattern(term: str) -> re.Pattern[str]:
    """Han terms match anywhere (no spaces between words); others as whole words."""
    if _HAN_ONLY.match(term):
        return re.compile(re.escape(term), re.IGNORECASE)
    return re.compile(rf"(?<![^\W_]){re.escape(term)}(?![^\W_])", re.IGNORECASE)


def best_snippet(text: str, terms: Sequence[str], max_chars: int = 300) -> str:
    """The part of ``text`` (whitespace runs collapsed to one space) of at most ``max_chars``
    characters that holds the most distinct ``terms`` (then the most occurrences, then the
    earliest), widened to word boundaries around the matches; ``…`` marks a cut at either end.
    With no term found it is the start of the text. A text that fits is returned whole."""
    if max_chars <= 0:
        raise ValueError(f"max_chars={max_chars} must be positive")
    flat = " ".join(text.split())
    if len(flat) <= max_chars:
        return flat
    occ: list[tuple[int, int, str]] = []  # (start, end, term)
    for term in dict.fromkeys(t.lower() for t in terms if t and t.strip()):
        if len(term) > max_chars:
            continue
        for m in _term_pattern(term).finditer(flat):
            occ.append((m.start(), m.end(), term))
            if len(occ) > _MAX_OCCURRENCES:
                break
    occ.sort()
    if not occ:
        a = b = 0
    else:
        best = (-1, -1)
        a, b = occ[0][0], occ[0][1]
        j = 0
        for i, (start, _, _) in enumerate(occ):  # windows starting at each occurrence
            j = max(j, i)
            while j + 1 < len(occ) and occ[j + 1][1] - start <= max_chars:
                j += 1
            window = occ[i : j + 1]
            score = (len({t for _, _, t in window}), len(window))
            if score > best:
                best, a, b = score, start, max(e for _, e, _ in window)
    # centre the matched span [a, b) in a max_chars window, then snap to word boundaries
    slack = max_chars - (b - a)
    start = max(0, a - slack // 2)
    end = min(len(flat), start + max_chars)
    start = max(0, end - max_chars)
    if start > 0 and flat[start - 1] != " ":
        nxt = flat.find(" ", start, a)
        if nxt != -1:
            start = nxt + 1
    if end < len(flat) and flat[end] != " ":
        prev = flat.rfind(" ", max(b, start), end)
        if prev != -1:
            end = prev
    core = flat[start:end].strip()
    return ("…" if start > 0 else "") + core + ("…" if end < len(flat) else "")


# -- front matter and page reading -----------------------------------------------------------
def parse_front_matter(text: str, where: str = "page") -> tuple[dict[str, object], str]:
    """``(fields, body)``: a leading ``---`` … ``---`` YAML block (a mapping) and the rest; no
    block → ``({}, text)``. A block that is not a mapping raises :class:`WebSearchError`."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            import yaml

            block = "\n".join(lines[1:i])
            try:
                data = yaml.safe_load(block) if block.strip() else {}
            except yaml.YAMLError as exc:
                raise WebSearchError(f"{where}: invalid front matter: {exc}") from None
            if not isinstance(data, dict):
                raise WebSearchError(f"{where}: front matter must be a mapping of key: value lines")
            return {str(k).lower(): v for k, v in data.items()}, "\n".join(lines[i + 1 :])
    return {}, text  # no closing line: not front matter


_CANONICAL = re.compile(r"<link\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")


def _canonical_url(html: str) -> str:
    import html as html_mod

    for m in _CANONICAL.finditer(html[:65536]):
        attrs = {k.lower(): (v1 or v2 or v3) for k, v1, v2, v3 in _ATTR.findall(m.group(0))}
        if "canonical" in attrs.get("rel", "").lower().split() and attrs.get("href"):
            return html_mod.unescape(attrs["href"].strip())
    return ""


def _as_datetime(value: object, where: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime.combine(value, dtime(0), tzinfo=UTC)
    try:
        return datetime.fromisoformat(str(value).strip())
    except ValueError:
        raise WebSearchError(f"{where}: published={value!r} is not an ISO 8601 date") from None


def _check_url(url: object, where: str) -> str:
    if not isinstance(url, str) or not url.strip():
        raise WebSearchError(f"{where}: url={url!r} must be a non-empty string")
    url = url.strip()
    if urlsplit(url).scheme.lower() not in ("http", "https", "file"):
        raise WebSearchError(f"{where}: url={url!r} must be an http, https or file URL")
    return url


@dataclass(slots=True)
class LocalPage:
    """One page of a :class:`LocalFolderProvider`."""

    path: str  # relative to the folder, '/'-separated
    url: str
    title: str
    text: str
    published_at: datetime | None = None
    url_from: str = "file"  # "urls.json" | "front matter" | "canonical" | "file"
