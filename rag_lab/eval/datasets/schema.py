"""The dataset schema: file names, typed rows (:class:`CorpusDoc`, :class:`QueryItem`, :class:`FAQItem`,
:class:`HistoryTurn`), :class:`Dataset` with its subsets, and the error type."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import rag_lab

CORPUS_FILE = "corpus.jsonl"
FAQ_FILE = "faq.jsonl"
HISTORY_FILE = "history.jsonl"
QUERIES_FILE = "queries.jsonl"
MAX_VALUE_CHARS = 80

_CORPUS_FIELDS = {"id", "title", "text", "metadata"}
_QUERY_FIELDS = {"id", "question", "answers", "gold_ids", "metadata", "relevance"}
_FAQ_FIELDS = {"id", "question", "answers", "similar_questions", "negative_questions"}
_HISTORY_FIELDS = {"query_id", "turns"}


class DatasetError(ValueError):
    """A dataset file is missing or holds an invalid row."""


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    """One document of the corpus (becomes one Knowledge in the pipeline)."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FAQItem:
    """One FAQ entry (optional ``faq.jsonl``); ingested into an FAQ knowledge base."""

    id: str
    question: str
    answers: list[str]
    similar_questions: list[str] = field(default_factory=list)
    negative_questions: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class HistoryTurn:
    """One earlier turn of the conversation a query belongs to (optional ``history.jsonl``)."""

    question: str
    answer: str


@dataclass(frozen=True, slots=True)
class QueryItem:
    """One evaluation question with its reference answers and gold document ids."""

    id: str
    question: str
    answers: list[str]
    gold_ids: list[str]
    metadata: dict[str, Any] = field(default_factory=dict)
    #: optional graded qrels ``{doc_id: grade >= 0}`` (nDCG's gains); a gold id without a grade
    #: counts 1, so an absent ``relevance`` is the binary relevance of ``gold_ids``
    relevance: dict[str, int] = field(default_factory=dict)

    def grades(self) -> dict[str, int]:
        """Gain per document: 1 for each gold id, overridden by :attr:`relevance`."""
        return {**dict.fromkeys(self.gold_ids, 1), **self.relevance}


def datasets_root() -> Path:
    """Return the repository's ``datasets/`` folder."""
    return Path(rag_lab.__file__).resolve().parent.parent / "datasets"


def list_datasets() -> list[str]:
    """Names of the datasets under :func:`datasets_root` (folders holding both files)."""
    root = datasets_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / CORPUS_FILE).is_file() and (p / QUERIES_FILE).is_file())


@dataclass(slots=True)
class Dataset:
    """A loaded, validated dataset."""

    name: str
    path: Path
    corpus: list[CorpusDoc]
    queries: list[QueryItem]
    skipped_lines: list[str] = field(default_factory=list)
    #: optional ``faq.jsonl``: FAQ entries searched beside the corpus
    faq: list[FAQItem] = field(default_factory=list)
    #: optional ``history.jsonl``: earlier turns per query id, replayed before the question
    history: dict[str, list[HistoryTurn]] = field(default_factory=dict)

    def doc(self, doc_id: str) -> CorpusDoc:
        """Return the corpus document ``doc_id`` (KeyError naming it if absent)."""
        for d in self.corpus:
            if d.id == doc_id:
                return d
        raise KeyError(f"{self.name}: no corpus document with id {_short(doc_id)}")

    def qrels(self) -> dict[str, set[str]]:
        """Gold ids per query id, the ``qrels`` argument of ``evaluate_retrieval``."""
        return {q.id: set(q.gold_ids) for q in self.queries}

    def graded_qrels(self) -> dict[str, dict[str, int]] | None:
        """Grades per query id when some query carries ``relevance``, else ``None`` (binary)."""
        if not any(q.relevance for q in self.queries):
            return None
        return {q.id: q.grades() for q in self.queries}

    def head(self, n: int) -> Dataset:
        """The first ``n`` queries with the full corpus."""
        _check_count("n", n)
        queries = list(self.queries[:n])
        return replace(
            self,
            queries=queries,
            skipped_lines=list(self.skipped_lines),
            history={q.id: self.history[q.id] for q in queries if q.id in self.history},
        )

    def subset(self, n_queries: int, max_docs: int | None = None, seed: int = 0, start: int = 0) -> Dataset:
        """``n_queries`` queries from the ``start``-th (0-based; default the first), all their gold
        docs, and other docs up to ``max_docs``.

        Distractors are drawn with ``random.Random(seed)``; the kept documents stay in corpus
        order. ``max_docs=None`` keeps the whole corpus. Raises ValueError when the gold documents
        alone exceed ``max_docs``.
        """
        _check_count("n_queries", n_queries)
        _check_count("start", start)
        queries = list(self.queries[start : start + n_queries])
        history = {q.id: self.history[q.id] for q in queries if q.id in self.history}
        if max_docs is None:
            return replace(self, queries=queries, skipped_lines=list(self.skipped_lines), history=history)
        _check_count("max_docs", max_docs)
        gold = {g for q in queries for g in q.gold_ids}
        if len(gold) > max_docs:
            raise ValueError(
                f"{self.name}: the first {len(queries)} queries have {len(gold)} gold documents, "
                f"more than max_docs={max_docs}"
            )
        others = [d.id for d in self.corpus if d.id not in gold]
        n_extra = min(max_docs - len(gold), len(others))
        keep = gold | set(random.Random(seed).sample(others, n_extra))
        corpus = [d for d in self.corpus if d.id in keep]
        return replace(self, queries=queries, corpus=corpus, skipped_lines=list(self.skipped_lines), history=history)


def _check_count(name: str, value: int) -> None:
    """Raise ValueError unless ``value`` is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")


def _short(value: Any) -> str:
    """repr-like rendering of ``value`` cut to MAX_VALUE_CHARS characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 3] + "..."
    return text


def _error(path: Path, line: int, fieldname: str, value: Any, problem: str) -> DatasetError:
    """Build the standard error: ``file:line: field 'x' = value: problem``."""
    return DatasetError(f"{path}:{line}: field {fieldname!r} = {_short(value)}: {problem}")
