"""Tokenisation for the keyword (BM25) index.

Rules, in order:

* the text is lower-cased (``str.lower``);
* runs of Han characters are segmented with jieba ``cut_for_search`` (words plus their
  sub-words, e.g. 北京大学 → 北京, 大学, 北京大学); punctuation-only pieces are dropped;
* everything else is split on non-word characters (``[^\\W_]+``: Unicode letters and digits,
  underscores act as separators) and a small English stop-word list is removed.

The same function tokenises documents and queries, so both sides always agree. ``identity`` names
the rules and the jieba version; an index built with another identity is rebuilt, and later stage
caches can key on it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

#: A small English stop-word list (function words only, so content words are never lost).
ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """
    a an and are as at be been but by can could did do does for from had has have he her his i
    if in into is it its me my no not of on or our she so than that the their them then there
    these they this those to was we were what when where which who whom why will with would you
    your
    """.split()
)

# CJK Unified Ideographs, Extension A, compatibility ideographs and Extensions B–F.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_HAN_RUN = re.compile(f"[{_HAN}]+")
_WORD = re.compile(r"[^\W_]+")

_jieba_lock = threading.Lock()
_jieba_cut = None


def _cut_for_search(text: str) -> list[str]:
    """jieba ``cut_for_search``, imported and initialised once (lazily, thread-safe)."""
    global _jieba_cut
    if _jieba_cut is None:
        with _jieba_lock:
            if _jieba_cut is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba_cut = jieba.cut_for_search
    return list(_jieba_cut(text))


def _jieba_version() -> str:
    try:
        from importlib.metadata import version

        return version("jieba")
    except Exception:  # pragma: no cover - jieba is a hard dependency
        return "unknown"


class Tokenizer:
    """Lower-case + Latin word split with stop words + jieba for Han runs."""

    def __init__(self, stopwords: Iterable[str] = ENGLISH_STOPWORDS) -> None:
        self.stopwords = frozenset(w.lower() for w in stopwords)
        sw = "default" if self.stopwords == ENGLISH_STOPWORDS else f"custom{len(self.stopwords)}"
        self.identity = f"rag_lab.tokenize/v1;lower;word=[^\\W_]+;stop={sw};han=jieba-{_jieba_version()}-cut_for_search"

    def __call__(self, text: str) -> list[str]:
        return self.tokenize(text)

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` in reading order (duplicates kept: BM25 counts them)."""
        if not text:
            return []
        text = text.lower()
        out: list[str] = []
        pos = 0
        for m in _HAN_RUN.finditer(text):
            if m.start() > pos:
                out.extend(self._latin(text[pos : m.start()]))
            for piece in _cut_for_search(m.group()):
                piece = piece.strip()
                if piece and _WORD.search(piece):
                    out.append(piece)
            pos = m.end()
        if pos < len(text):
            out.extend(self._latin(text[pos:]))
        return out

    def _latin(self, text: str) -> list[str]:
        return [w for w in _WORD.findall(text) if w not in self.stopwords]


#: The default tokenizer used by :class:`~rag_lab.retrieval.keyword_index.KeywordIndex`.
DEFAULT_TOKENIZER = Tokenizer()


def tokenize(text: str) -> list[str]:
    """Tokenise with the default rules (see the module docstring)."""
    return DEFAULT_TOKENIZER.tokenize(text)
