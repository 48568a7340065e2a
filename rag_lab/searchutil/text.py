"""Text utilities shared by search, rerank and merge (spec §0, §6.1–§6.4, §6.7).

Go string semantics are reproduced where Python differs:

* ``go_trim`` / ``go_fields`` use Go's Unicode ``White_Space`` set (Python's ``str.strip`` and
  ``str.split`` also treat U+001C..U+001F as whitespace);
* ``go_lower`` uses simple lower-casing (Python maps ``İ`` to two code points and applies the
  final-sigma rule, Go does neither);
* ``html_escape5`` is Go's ``html.EscapeString`` (``html.escape`` writes other entities).

Lengths are in code points ("runes") unless a name says bytes.
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, MutableSequence
from functools import lru_cache
from typing import Any, Protocol, TypeVar

__all__ = [
    "markdown_title",
    "GO_WHITESPACE",
    "go_trim",
    "go_fields",
    "go_lower",
    "is_go_space",
    "utf8_len",
    "html_escape5",
    "contains_han",
    "tokenize_simple",
    "jaccard",
    "normalize_content",
    "is_content_contained",
    "content_overlap_ratio",
    "build_content_signature",
    "normalize_keyword_scores",
]

#: Go ``unicode.IsSpace``: ASCII \t \n \v \f \r and space, U+0085, U+00A0, and the other
#: characters with the Unicode White_Space property.
GO_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_GO_WS_SET = frozenset(GO_WHITESPACE)
_FIELDS_RE = re.compile("[^" + re.escape(GO_WHITESPACE) + "]+")


def is_go_space(ch: str) -> bool:
    """Go ``unicode.IsSpace`` for one character."""
    return ch in _GO_WS_SET


def go_trim(s: str) -> str:
    """Go ``strings.TrimSpace``."""
    return s.strip(GO_WHITESPACE)


def go_fields(s: str) -> list[str]:
    """Go ``strings.Fields``: split on whitespace runs, no empty fields."""
    return _FIELDS_RE.findall(s)


def go_lower(s: str) -> str:
    """Go ``strings.ToLower`` (simple case mapping, no final-sigma context)."""
    if "\u0130" in s:
        s = s.replace("\u0130", "i")
    if "\u03a3" in s:
        s = s.replace("\u03a3", "\u03c3")
    return s.lower()


def utf8_len(s: str) -> int:
    """Go ``len(s)``: the UTF-8 byte length."""
    return len(s.encode("utf-8", "surrogatepass"))


_HTML5_TABLE = str.maketrans({"&": "&amp;", "'": "&#39;", "<": "&lt;", ">": "&gt;", '"': "&#34;"})


def html_escape5(s: str) -> str:
    """Go ``html.EscapeString``: escapes exactly ``& ' < > "`` (spec §0)."""
    return s.translate(_HTML5_TABLE)


# Unicode Script=Han (Unicode 15.1 Scripts.txt), as Go's ``unicode.Han`` table.
_HAN_RANGES = (
    (0x2E80, 0x2E99),
    (0x2E9B, 0x2EF3),
    (0x2F00, 0x2FD5),
    (0x3005, 0x3005),
    (0x3007, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303B),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9),
    (0x16FE2, 0x16FE3),
    (0x16FF0, 0x16FF1),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B739),
    (0x2B740, 0x2B81D),
    (0x2B820, 0x2CEA1),
    (0x2CEB0, 0x2EBE0),
    (0x2EBF0, 0x2EE5D),
    (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A),
    (0x31350, 0x323AF),
)
_HAN_RE = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in _HAN_RANGES) + "]")


def contains_han(s: str) -> bool:
    """True when ``s`` holds a character of the Han script."""
    return _HAN_RE.search(s) is not None


_jieba_lock = threading.Lock()
_jieba_cut_for_search: Callable[..., Iterable[str]] | None = None


def quiet_jieba() -> Any:
    """The jieba module, initialised without its dictionary-loading notices on stderr (jieba
    logs "Building prefix dict…" / "Loading model cost…" at DEBUG through its own stderr handler;
    its level goes to WARNING before the first load). Idempotent."""
    import logging

    import jieba  # noqa: PLC0415 (lazy: ~1.5 s dictionary load)

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _cut_for_search(text: str) -> Iterable[str]:
    """jieba search-mode segmentation (HMM on); jieba is imported on first use."""
    global _jieba_cut_for_search
    if _jieba_cut_for_search is None:
        with _jieba_lock:
            if _jieba_cut_for_search is None:
                _jieba_cut_for_search = quiet_jieba().cut_for_search
    return _jieba_cut_for_search(text, HMM=True)


def _is_noise_char(ch: str) -> bool:
    return ch in _GO_WS_SET or unicodedata.category(ch)[0] in "PS"


def tokenize_simple(text: str) -> set[str]:
    """Token set of §6.1: jieba search mode when the text has Han characters, else whitespace.

    Tokens are lower-cased and trimmed; a token is kept when it has more than one rune and is
    not made only of punctuation, symbols or whitespace.
    """
    t = go_lower(go_trim(text))
    if not t:
        return set()
    pieces: Iterable[str] = _cut_for_search(t) if contains_han(t) else go_fields(t)
    out: set[str] = set()
    for piece in pieces:
        tok = go_trim(piece)
        # letters and digits are never noise: the isalnum() test spares the per-character check
        if len(tok) > 1 and (tok.isalnum() or not all(_is_noise_char(c) for c in tok)):
            out.add(tok)
    return out


def jaccard(a: set[str] | frozenset[str], b: set[str] | frozenset[str]) -> float:
    """|a ∩ b| / (|a| + |b| - |a ∩ b|); 0 when both are empty (§6.2)."""
    if not a and not b:
        return 0.0
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    union = len(a) + len(b) - inter
    if union == 0:
        return 0.0
    return inter / union


@lru_cache(maxsize=32768)  # pure; merge and dedup normalise the same contents several times
def normalize_content(s: str) -> str:
    """Lower-case, trim and collapse whitespace runs to single spaces (§6.3)."""
    t = go_lower(go_trim(s))
    if not t:
        return ""
    return " ".join(go_fields(t))


def is_content_contained(short_n: str, long_n: str) -> bool:
    """Substring test on two already normalised strings; false when either is empty (§6.3)."""
    if not short_n or not long_n:
        return False
    if utf8_len(short_n) > utf8_len(long_n):
        return False
    return short_n in long_n


def content_overlap_ratio(a: str, b: str) -> float:
    """|small ∩ large| / |small| over ``tokenize_simple`` sets; the tie makes ``a`` small (§6.3)."""
    ta = tokenize_simple(a)
    tb = tokenize_simple(b)
    if not ta or not tb:
        return 0.0
    small, large = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    return len(small & large) / len(small)


@lru_cache(maxsize=32768)
def build_content_signature(content: str) -> str:
    """Lower-case hex MD5 of the normalised content; ``""`` for blank content (§6.4)."""
    norm = normalize_content(content)
    if not norm:
        return ""
    return hashlib.md5(norm.encode("utf-8", "surrogatepass")).hexdigest()


class _Scored(Protocol):
    """A result whose score :func:`normalize_keyword_scores` rewrites."""

    score: float


_S = TypeVar("_S", bound=_Scored)


def normalize_keyword_scores(results: MutableSequence[_S | None], is_keyword: Callable[[_S], bool]) -> None:
    """Min-max normalise, in place, the scores of the results ``is_keyword`` selects (§6.7).

    With ten or more keyword results the bounds are the 5th and 95th percentile values of the
    sorted scores (indices ``n*5//100`` and ``n*95//100``).
    """
    kw = [r for r in results if r is not None and is_keyword(r)]
    n = len(kw)
    if n == 0:
        return
    if n == 1:
        kw[0].score = 1.0
        return
    scores = [float(r.score) for r in kw]
    lo, hi = min(scores), max(scores)
    if hi <= lo:
        for r in kw:
            r.score = 1.0
        return
    if n >= 10:
        ordered = sorted(scores)
        lo = ordered[n * 5 // 100]
        hi = ordered[n * 95 // 100]
    rng = hi - lo
    if rng > 0:
        for r in kw:
            s = min(max(float(r.score), lo), hi)
            r.score = min(max((s - lo) / rng, 0.0), 1.0)
    else:
        for r in kw:
            r.score = 1.0


def markdown_title(text: str) -> str:
    """The text of a leading ``# `` heading: the first non-blank line when it is one, else ``""``."""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("# "):
            return s[2:].strip()
        if s:
            break
    return ""
