"""Offline test-set generation: questions a person would type, each with a known source chunk
and, as its reference answer, the span of the chunk it asks for; made without any model.

The forms are templates over one sentence (:mod:`.forms_en` for English — definition, identity,
date, number, agent, place — and :mod:`.forms_zh` for Chinese, with jieba's word boundaries) or
over one table chunk's rows and columns (:mod:`.table_forms`). :func:`generate_candidates` lists
every question a chunk gives; the rule-based writer (:mod:`.build`) keeps the first that passes
the filters.
These questions are still weaker than human ones: they follow fixed templates, ask about a fact
with the source's words (only the subject is named as a person would type it, by its document's
title), and nobody checked them (``reviewed: false``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rag_lab.eval.testset.en_subject import common_name
from rag_lab.eval.testset.forms_en import EN_FORMS, Form, english_questions, split_sentences
from rag_lab.eval.testset.forms_zh import ZH_FORMS, chinese_questions, split_chinese
from rag_lab.eval.testset.table_forms import table_questions
from rag_lab.searchutil.language import han_ratio

__all__ = [
    "FORMS",
    "Candidate",
    "SourceChunk",
    "generate_candidates",
    "normalize_question",
    "sentences",
]

#: every form a question can have, in the order the forms of one chunk are listed
FORMS: tuple[str, ...] = tuple(dict.fromkeys((*EN_FORMS, *ZH_FORMS, "table", "bridge", "comparison")))
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；])\s*|\n+")


@dataclass(frozen=True, slots=True)
class SourceChunk:
    """A chunk a question is generated from: its id, its document's id and title, its text and
    its chunk type (``text``, ``table_summary``, ``table_column``)."""

    chunk_id: str
    doc_id: str
    title: str
    text: str
    kind: str = "text"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A generated question before the filters: its form (``generator``), the chunk holding its
    answer, the subject it names (``written``: that subject as the sentence writes it, when the
    question names it otherwise). A two-hop question (``bridge``) also has ``via``, the chunk of
    its first hop, and ``entity``, the name linking the two."""

    question: str
    generator: str
    source: SourceChunk
    answers: list[str] = field(default_factory=list)
    subject: str = ""
    verb: str = ""
    via: SourceChunk | None = None
    entity: str = ""
    written: str = ""

    @property
    def gold_ids(self) -> list[str]:
        """The documents the question needs: the first hop's, then the answer's."""
        return list(dict.fromkeys([*([self.via.doc_id] if self.via else []), self.source.doc_id]))


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after . ! ? 。 ！ ？ ; and at line breaks), stripped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def normalize_question(text: str) -> str:
    """Lower-cased, whitespace collapsed, trailing punctuation and spaces removed: the form two
    questions (or a question and a sentence) are compared in."""
    return re.sub(r"\s+", " ", text.lower()).strip().rstrip("?？.。!！ ").strip()


def _candidate(f: Form, src: SourceChunk) -> Candidate:
    return Candidate(f.question, f.form, src, [f.answer], f.subject, f.verb)


def _named_as_typed(f: Form, src: SourceChunk) -> Candidate:
    """An English form's candidate naming its subject as a person would type it
    (:func:`.en_subject.common_name`: "When was Nick Hexum born?", not "When was Nicholas Lofton
    Hexum born?")."""
    name = common_name(f.subject, src.title) if f.subject else ""
    if not name or name == f.subject or f.subject not in f.question:
        return _candidate(f, src)
    question = f.question.replace(f.subject, name, 1)
    return Candidate(question, f.form, src, [f.answer], name, f.verb, written=f.subject)


def generate_candidates(src: SourceChunk) -> list[Candidate]:
    """Every question the forms make of ``src``, in reading order (sentence by sentence, each
    sentence's forms in :data:`FORMS` order); a table chunk's from its rows or column range."""
    if src.kind != "text":
        return [_candidate(f, src) for f in table_questions(src.kind, src.text, src.title)]
    out: list[Candidate] = []
    if han_ratio(src.text) >= 0.3:
        for i, sent in enumerate(split_chinese(src.text)):
            out += [_candidate(f, src) for f in chinese_questions(sent, src.title, i == 0)]
        return out
    for sent in split_sentences(src.text):
        out += [_named_as_typed(f, src) for f in english_questions(sent, src.title, src.text)]
    return out
