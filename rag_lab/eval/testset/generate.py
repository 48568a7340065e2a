"""Offline test-set generation: questions with a known source chunk, made without any model.

Three generators, each a pure function of a chunk and the KB's term statistics:

* ``keyphrase``: the chunk's most distinctive terms (BM25 weight: IDF within the KB times the
  saturated term frequency), in reading order, as a keyword query;
* ``cloze``: a sentence of the chunk holding its most distinctive term, the term blanked, asked
  as a question; the blanked term is the reference answer;
* ``title``: the document's title with two distinctive terms of the chunk.

Terms come from the keyword index's own tokenizer (:func:`rag_lab.retrieval.tokenization.tokenize`:
jieba for Chinese, stop words removed for English), so what a question asks for is what BM25
can match. These questions are weaker than human ones: they reuse the source's words (lexical
overlap favours keyword search) and nobody checked them (``reviewed: false``).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_lab.retrieval.tokenization import tokenize
from rag_lab.searchutil.text import contains_han

__all__ = [
    "GENERATORS",
    "Candidate",
    "SourceChunk",
    "TermStats",
    "cloze_question",
    "distinctive_terms",
    "generate_candidates",
    "keyphrase_question",
    "normalize_question",
    "sentences",
    "stratified_order",
    "title_question",
]

GENERATORS: tuple[str, ...] = ("keyphrase", "cloze", "title")
BLANK = "____"
_K1 = 1.5
_B = 0.75
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；])\s*|\n+")


@dataclass(frozen=True, slots=True)
class SourceChunk:
    """A chunk a question is generated from: its id, its document's id and title, its text."""

    chunk_id: str
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Candidate:
    """A generated question before the filters."""

    question: str
    generator: str
    source: SourceChunk
    answers: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TermStats:
    """Document frequencies of terms over the KB's chunks (BM25 statistics)."""

    n_chunks: int
    df: Counter[str]
    avg_len: float

    @classmethod
    def from_texts(cls, texts: Sequence[str]) -> TermStats:
        df: Counter[str] = Counter()
        total = 0
        for t in texts:
            toks = tokenize(t)
            total += len(toks)
            df.update(set(toks))
        return cls(len(texts), df, total / len(texts) if texts else 0.0)

    def idf(self, term: str) -> float:
        n, d = self.n_chunks, self.df.get(term, 0)
        return math.log(1.0 + (n - d + 0.5) / (d + 0.5))


def _good_term(term: str) -> bool:
    """A term worth asking for: not a number, two or more characters (one Han character is too vague)."""
    return len(term) >= 2 and not term.isdigit()


def distinctive_terms(text: str, stats: TermStats, n: int) -> list[str]:
    """The ``n`` terms of ``text`` with the highest BM25 weight in the KB (ties: first in the
    text), returned in reading order. A term that is part of a longer kept term (jieba's
    sub-words) is skipped."""
    toks = tokenize(text)
    if not toks:
        return []
    tf = Counter(toks)
    first: dict[str, int] = {}
    for i, t in enumerate(toks):
        first.setdefault(t, i)
    norm = 1 - _B + _B * len(toks) / (stats.avg_len or 1.0)

    def weight(t: str) -> float:
        return stats.idf(t) * tf[t] * (_K1 + 1) / (tf[t] + _K1 * norm)

    ranked = sorted((t for t in tf if _good_term(t)), key=lambda t: (-weight(t), first[t]))
    chosen: list[str] = []
    for t in ranked:
        if any(t in c for c in chosen):
            continue
        inside = [i for i, c in enumerate(chosen) if c in t]
        if inside:  # jieba's sub-word came first: keep the whole word instead
            chosen[inside[0]] = t
            continue
        chosen.append(t)
        if len(chosen) == n:
            break
    return sorted(chosen, key=lambda t: first[t])


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after . ! ? 。 ！ ？ ; and at line breaks), stripped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def normalize_question(text: str) -> str:
    """Lower-cased, whitespace collapsed, trailing punctuation and spaces removed: the form two
    questions (or a question and a sentence) are compared in."""
    return re.sub(r"\s+", " ", text.lower()).strip().rstrip("?？.。!！ ").strip()


def keyphrase_question(src: SourceChunk, stats: TermStats, n_terms: int = 4) -> Candidate | None:
    terms = distinctive_terms(src.text, stats, n_terms)
    if len(terms) < 2:
        return None
    return Candidate(" ".join(terms), "keyphrase", src)


def _find_term(sentence: str, term: str) -> re.Match[str] | None:
    if contains_han(term):
        import jieba  # a whole word of the sentence (precise mode), not a sub-word of one

        pos = 0
        for word in jieba.lcut(sentence):
            if word.lower() == term:
                return re.compile(re.escape(word)).match(sentence, pos)
            pos += len(word)
        return None
    return re.search(rf"(?<![^\W_]){re.escape(term)}(?![^\W_])", sentence, flags=re.IGNORECASE)


def cloze_question(src: SourceChunk, stats: TermStats, max_words: int = 30) -> Candidate | None:
    """Blank the most distinctive term in the first sentence (of enough length) that holds it."""
    han = contains_han(src.text)
    terms = distinctive_terms(src.text, stats, 6)
    by_weight = sorted(terms, key=lambda t: -stats.idf(t))
    for term in by_weight:
        for sent in sentences(src.text):
            size = len(sent) if han else len(sent.split())
            if size < (12 if han else 6):
                continue
            m = _find_term(sent, term)
            if m is None:
                continue
            blanked = sent[: m.start()] + BLANK + sent[m.end() :]
            if not han and len(blanked.split()) > max_words:
                words = blanked.split()
                at = next(i for i, w in enumerate(words) if BLANK in w)
                lo = max(0, min(at - max_words // 2, len(words) - max_words))
                blanked = " ".join(words[lo : lo + max_words])
            blanked = blanked.rstrip("。！？.!?；; ")
            if han:
                q = f"填空：{blanked}？"
            else:
                q = f"Which word fills the blank: {blanked}?"
            return Candidate(q, "cloze", src, answers=[m.group()])
    return None


def title_question(src: SourceChunk, stats: TermStats) -> Candidate | None:
    title = src.title.strip()
    if not title:
        return None
    t_toks = set(tokenize(title))
    terms = [t for t in distinctive_terms(src.text, stats, 5) if t not in t_toks][:2]
    if not terms:
        return None
    if contains_han(title + "".join(terms)):
        return Candidate(f"《{title}》中关于{'和'.join(terms)}的内容是什么？", "title", src)
    return Candidate(f"What does {title} say about {' and '.join(terms)}?", "title", src)


_MAKERS = {"keyphrase": keyphrase_question, "cloze": cloze_question, "title": title_question}


def generate_candidates(src: SourceChunk, stats: TermStats, first: str) -> list[Candidate]:
    """Every generator's question for ``src``, the one named ``first`` first, then the others in
    :data:`GENERATORS` order (the caller keeps the first that passes its filters)."""
    order = [first, *(g for g in GENERATORS if g != first)]
    return [c for g in order if (c := _MAKERS[g](src, stats)) is not None]


def stratified_order(chunks: Sequence[SourceChunk], seed: int) -> list[SourceChunk]:
    """Chunks in a seeded order that takes one chunk per document in turn: documents shuffled,
    each document's chunks shuffled, then round robin (so n questions cover min(n, #docs)
    documents)."""
    rng = random.Random(seed)
    by_doc: dict[str, list[SourceChunk]] = {}
    for c in sorted(chunks, key=lambda c: (c.doc_id, c.chunk_id)):
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    queues = []
    for d in docs:
        q = list(by_doc[d])
        rng.shuffle(q)
        queues.append(q)
    out: list[SourceChunk] = []
    depth = 0
    while any(depth < len(q) for q in queues):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out
