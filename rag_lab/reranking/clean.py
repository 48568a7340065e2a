"""``clean_passage``: strip Markdown noise before a passage is scored (spec §4.6.4 + seed).

The replacement rules are those of §4.6.4, steps 2–15, with RE2 semantics (``\\s`` is
``[\\t\\n\\f\\r ]``, ``\\d`` is ``[0-9]``). Step 1 (unwrap every triple-backtick span) is
replaced by the seed's fence handling:

* only *top-level* fences are recognised: a line of at least three backticks or tildes with at
  most three leading spaces, not inside a list item (or a blockquote, whose lines start with
  ``>``); inline code and indented code are left to the other rules;
* a fence is closed by a line of the same character, at least as long, with at most three
  leading spaces and nothing but spaces/tabs after it; an unclosed fence runs to the end;
* the delimiter lines are removed and the body is kept **verbatim**: it is set aside (a
  placeholder that no rule can match across) while the other rules run on the text around it,
  then put back. Newline collapsing (step 14) therefore only touches text outside fences.

The chunk's own content is never modified; the function returns a new string.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rag_lab.searchutil.text import go_trim

__all__ = ["clean_passage", "split_top_level_fences"]

_S = r"[\t\n\f\r ]"  # RE2 \s
_NS = r"\t\n\f\r "  # the same set inside a class
_U = rf"[^(){_NS}]*(?:\([^)]*\)[^(){_NS}]*)*"  # URL with one level of balanced parentheses

_LATEX_BLOCK = re.compile(r"\$\$(.*?)\$\$", re.S)
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_LINKED_IMAGE = re.compile(rf"\[!\[([^\]]*)\]\(({_U})\)\]\({_U}\)")
_IMAGE = re.compile(rf"!\[[^\]]*\]\({_U}\)")
_LINK = re.compile(rf"\[([^\]]+)\]\({_U}\)")
_RAW_URL = re.compile(rf"https?://[^{_NS})\]>]+")
_TABLE_SEP = re.compile(r"^[ \t]*\|[ \t:|-]+\|[ \t]*$", re.M)
_TABLE_ROW = re.compile(r"^[ \t]*\|(.+?)\|[ \t]*$", re.M)
_HEADING = re.compile(rf"^#{{1,6}}{_S}+", re.M)
_BLOCKQUOTE = re.compile(rf"^>{_S}?", re.M)
_BOLD3 = re.compile(r"\*{3}(.+?)\*{3}")
_BOLD2 = re.compile(r"\*{2}(.+?)\*{2}")
_BOLD1 = re.compile(r"\*(.+?)\*")
_LIST_MARKER = re.compile(rf"^[\t ]*(?:[-*+]|[0-9]+\.){_S}+", re.M)
_NEWLINES = re.compile(r"\n{3,}")


def _table_row(m: re.Match[str]) -> str:
    cells = (go_trim(c) for c in m.group(1).split("|"))
    return ", ".join(c for c in cells if c)


#: §4.6.4 steps 2–13, in order (step 1 is the fence handling, 14–15 run at the end).
_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_LATEX_BLOCK, lambda m: m.group(1)),
    (_HTML_TAG, lambda m: ""),
    (_LINKED_IMAGE, lambda m: "![" + m.group(1) + "](" + m.group(2) + ")"),
    (_IMAGE, lambda m: ""),
    (_LINK, lambda m: m.group(1)),
    (_RAW_URL, lambda m: ""),
    (_TABLE_SEP, lambda m: ""),
    (_TABLE_ROW, _table_row),
    (_HEADING, lambda m: ""),
    (_BLOCKQUOTE, lambda m: ""),
    (_BOLD3, lambda m: m.group(1)),
    (_BOLD2, lambda m: m.group(1)),
    (_BOLD1, lambda m: m.group(1)),
    (_LIST_MARKER, lambda m: ""),
)

# --- top-level fence detection ------------------------------------------------------------
_FENCE_OPEN = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)\Z", re.S)
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*\Z")
_LIST_ITEM = re.compile(r"( {0,3})([-*+]|[0-9]{1,9}[.)])([ \t]+|\Z)")


def _indent_width(line: str) -> int:
    """Leading indentation in columns (a tab advances to the next multiple of 4)."""
    col = 0
    for ch in line:
        if ch == " ":
            col += 1
        elif ch == "\t":
            col += 4 - col % 4
        else:
            break
    return col


def _list_content_column(m: re.Match[str]) -> int:
    """Column where a list item's content starts (CommonMark: 1–4 spaces after the marker)."""
    pad = len(m.group(3).expandtabs(4))
    if pad == 0 or pad > 4:
        pad = 1
    return len(m.group(1)) + len(m.group(2)) + pad


def _open_fence(core: str) -> tuple[str, int] | None:
    m = _FENCE_OPEN.match(core)
    if m is None:
        return None
    fence = m.group(2)
    if fence[0] == "`" and "`" in m.group(3):
        return None  # a backtick info string cannot hold backticks: that is inline code
    return fence[0], len(fence)


def split_top_level_fences(text: str) -> tuple[list[str], list[str]]:
    """Split ``text`` into the text outside top-level fences and the fence bodies.

    Returns ``(outside, bodies)`` with ``len(outside) == len(bodies) + 1``; the passage without
    its fence delimiters is ``outside[0] + bodies[0] + outside[1] + ...``. A body is the text
    between the opening line and the line break before the closing line (the whole rest for an
    unclosed fence). Fences with an empty body are dropped without splitting.
    """
    lines = text.split("\n")
    starts: list[int] = []
    pos = 0
    for line in lines:
        starts.append(pos)
        pos += len(line) + 1

    outside: list[str] = []
    bodies: list[str] = []
    pending: list[str] = []  # outside text of the current segment
    seg_start = 0
    list_col: int | None = None  # content column of the enclosing list, None outside lists
    prev_blank = True
    i = 0
    while i < len(lines):
        core = lines[i][:-1] if lines[i].endswith("\r") else lines[i]
        if not go_trim(core):
            prev_blank = True
            i += 1
            continue
        indent = _indent_width(core)
        if list_col is not None and indent >= list_col:
            prev_blank = False  # inside a list item: no top-level fence here
            i += 1
            continue
        fence = _open_fence(core)
        if fence is None:
            item = _LIST_ITEM.match(core)
            if item is not None:
                list_col = _list_content_column(item)
            elif list_col is not None and (prev_blank or core.lstrip(" ").startswith((">", "#"))):
                list_col = None
            prev_blank = False
            i += 1
            continue

        # A top-level fence opens on line i.
        list_col = None
        char, length = fence
        close = None
        for j in range(i + 1, len(lines)):
            cj = lines[j][:-1] if lines[j].endswith("\r") else lines[j]
            cm = _FENCE_CLOSE.match(cj)
            if cm is not None and cm.group(1)[0] == char and len(cm.group(1)) >= length:
                close = j
                break
        if close is None:
            body = "\n".join(lines[i + 1 :])
            end = len(text)
            next_i = len(lines)
        else:
            body = "\n".join(lines[i + 1 : close])
            if body.endswith("\r"):
                body = body[:-1]
            close_core = lines[close][:-1] if lines[close].endswith("\r") else lines[close]
            end = starts[close] + len(close_core)
            next_i = close + 1
        pending.append(text[seg_start : starts[i]])
        if body:
            outside.append("".join(pending))
            bodies.append(body)
            pending = []
        seg_start = end
        prev_blank = False
        i = next_i
    pending.append(text[seg_start:])
    outside.append("".join(pending))
    return outside, bodies


def clean_passage(text: str) -> str:
    """Remove Markdown/HTML noise from a passage for the rerank model (§4.6.4, seed).

    Top-level fenced code keeps its body verbatim (only the delimiter lines go); ``$$…$$``
    outside fences is unwrapped; HTML tags, images, link URLs, raw URLs and table separators
    are removed; table rows become ``a, b``; heading, blockquote, emphasis and list markers
    are stripped; 3+ newlines outside fences become 2; the result is trimmed.
    """
    if not text:
        return ""
    outside, bodies = split_top_level_fences(text)
    for pattern, repl in _RULES:
        outside = [pattern.sub(repl, seg) if seg else seg for seg in outside]
    outside = [_NEWLINES.sub("\n\n", seg) for seg in outside]
    parts: list[str] = [outside[0]]
    for body, seg in zip(bodies, outside[1:]):
        parts.append(body)
        parts.append(seg)
    return go_trim("".join(parts))
