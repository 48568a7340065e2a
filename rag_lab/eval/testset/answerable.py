"""Answerability of a generated question, checked against the gold text itself and never against
the pipeline the set will evaluate.

* :func:`contains_span`: the answer span occurs in the source chunk (case and spacing ignored;
  whole words for Latin text);
* :class:`PlainBM25`: a fixed Okapi BM25 (k1 1.2, b 0.75, Lucene's IDF) over the KB's documents,
  with its own plain tokenizer (lower-cased words, Han text as character bigrams: no stop words, no
  stemming, no jieba), so it shares nothing with the lab's keyword or vector engines. A question
  is findable when its source document ranks within a generous depth (:data:`FINDABLE_DEPTH`);
* :func:`answer_passages`: the other chunks of the KB that hold the answer span and most of the
  question's words: gold candidates for the labelling panel.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from rag_lab.searchutil.text import contains_han

__all__ = ["FINDABLE_DEPTH", "PlainBM25", "answer_passages", "contains_span", "names_title", "plain_terms"]

#: the plain BM25 rank (1-based) a source document must reach for its question to count as findable
FINDABLE_DEPTH = 50
_K1 = 1.2
_B = 0.75
_WORD = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
#: words of the question forms themselves, left out when a passage is matched to a question
_QUESTION_WORDS = frozenset(
    "what who when where which how many much is was are were did does do the a an of in on by to "
    "long high tall deep wide large population capacity area highest lowest".split()
)


def plain_terms(text: str) -> list[str]:
    """Lower-cased words and numbers; a run of Han characters as its character bigrams (a single
    character alone)."""
    out: list[str] = []
    for m in _WORD.finditer(text.lower()):
        tok = m.group()
        if _HAN.fullmatch(tok):
            out += [tok[i : i + 2] for i in range(len(tok) - 1)] if len(tok) > 1 else [tok]
        else:
            out += [p for p in _HAN.split(tok) if p]
            out += [b for h in _HAN.findall(tok) for b in ([h[i : i + 2] for i in range(len(h) - 1)] or [h])]
    return out


class PlainBM25:
    """Okapi BM25 over ``docs``: ``score = Σ idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · len /
    avg_len))`` with ``idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))``, query terms counted once each."""

    def __init__(self, docs: Sequence[str]) -> None:
        self._tfs = [Counter(plain_terms(d)) for d in docs]
        self._lens = [sum(tf.values()) for tf in self._tfs]
        self._avg = (sum(self._lens) / len(self._lens)) if self._lens else 0.0
        df: Counter[str] = Counter()
        for tf in self._tfs:
            df.update(tf.keys())
        n = len(self._tfs)
        self._idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self._postings: dict[str, list[int]] = {}
        for i, tf in enumerate(self._tfs):
            for t in tf:
                self._postings.setdefault(t, []).append(i)

    def __len__(self) -> int:
        return len(self._tfs)

    def scores(self, query: str) -> list[float]:
        """The BM25 score of every document for ``query`` (0.0 where no term is shared)."""
        out = [0.0] * len(self._tfs)
        for t in dict.fromkeys(plain_terms(query)):
            idf = self._idf.get(t)
            if idf is None:
                continue
            for i in self._postings[t]:
                tf = self._tfs[i][t]
                norm = 1.0 - _B + _B * self._lens[i] / (self._avg or 1.0)
                out[i] += idf * tf * (_K1 + 1.0) / (tf + _K1 * norm)
        return out

    def rank(self, query: str, index: int) -> int | None:
        """The 1-based rank of document ``index`` for ``query``, a tie counted against it (rank =
        the number of documents scoring at least as high); None when it shares no term."""
        scores = self.scores(query)
        mine = scores[index]
        if mine <= 0.0:
            return None
        return sum(1 for s in scores if s >= mine)


def names_title(question: str, title: str) -> bool:
    """The question names its document: at least half of the title's plain terms (its words
    outside parentheses) are terms of the question."""
    terms = set(plain_terms(re.sub(r"\([^()]*\)|（[^（）]*）", "", title)))
    if not terms:
        return False
    have = set(plain_terms(question))
    return sum(t in have for t in terms) * 2 >= len(terms)


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def contains_span(text: str, span: str) -> bool:
    """``span`` occurs in ``text``, case and runs of spaces ignored; a span that starts or ends
    with a letter or digit must do so at a word boundary of ``text`` (Han text excepted)."""
    s = _squash(span)
    if not s:
        return False
    t = _squash(text)
    if contains_han(s):
        return s in t
    return re.search(rf"(?<![^\W_]){re.escape(s)}(?![^\W_])", t) is not None


def answer_passages(
    answer: str, question: str, passages: Sequence[tuple[str, str, str]], source_id: str, share: float = 0.5
) -> list[tuple[str, str]]:
    """``(chunk id, document id)`` of the ``passages`` (``(chunk id, document id, text)``) other
    than ``source_id`` that hold the ``answer`` span and at least ``share`` of the question's
    content terms (its plain terms without the forms' own words), in the order given."""
    terms = {t for t in plain_terms(question) if t not in _QUESTION_WORDS} - set(plain_terms(answer))
    out: list[tuple[str, str]] = []
    for cid, doc, text in passages:
        if cid == source_id or not contains_span(text, answer):
            continue
        have = set(plain_terms(text))
        if not terms or sum(t in have for t in terms) >= share * len(terms):
            out.append((cid, doc))
    return out
