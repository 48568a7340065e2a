"""The dataset schema: file names, typed rows (:class:`CorpusDoc`, :class:`QueryItem`, :class:`FAQItem`,
:class:`HistoryTurn`), :class:`Dataset` with its subsets, and the error type."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rag_lab

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "CORPUS_FILE",
    "FAQ_FILE",
    "HISTORY_FILE",
    "MAX_VALUE_CHARS",
    "QUERIES_FILE",
    "CorpusDoc",
    "Dataset",
    "DatasetError",
    "FAQItem",
    "HistoryTurn",
    "QueryItem",
    "datasets_root",
    "list_datasets",
]

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
    metadata: dict[str, object] = field(default_factory=dict)


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


def is_rejected(q: QueryItem) -> bool:
    """Whether a reviewer rejected the question (it stays in the file and out of evaluations)."""
    review = q.metadata.get("review")
    return isinstance(review, dict) and review.get("status") == "rejected"


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
    #: questions a reviewer rejected (``metadata.review.status == "rejected"``, see
    #: :mod:`rag_lab.eval.labelling`): kept in the file, left out of :attr:`queries`
    rejected: list[QueryItem] = field(default_factory=list)

    @classmethod
    def from_frame(cls, queries: pd.DataFrame, corpus: pd.DataFrame | list[CorpusDoc], name: str = "frame") -> Dataset:
        """A dataset from pandas DataFrames with the files' columns (``queries``: id, question,
        answers, gold_ids, optional metadata / relevance; ``corpus``: id, text, optional title /
        metadata; or a list of :class:`CorpusDoc`). Rows are validated as the files' lines are;
        errors name ``<DataFrame queries>:N`` (N the 1-based row position) and the field. A cell
        holding None or NaN counts as absent."""
        if isinstance(corpus, list) and all(isinstance(d, CorpusDoc) for d in corpus):
            docs = list(corpus)
        else:
            docs = _corpus_docs(Path("<DataFrame corpus>"), _frame_rows(corpus))
        qs = _query_items(Path("<DataFrame queries>"), _frame_rows(queries), {d.id for d in docs})
        return cls(name=name, path=Path(f"<DataFrame {name}>"), corpus=docs, queries=qs)

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


def _frame_rows(frame: pd.DataFrame) -> list[tuple[int, dict[str, object]]]:
    """``(1-based row position, {column: value})`` without None / NaN cells; lists and arrays
    (e.g. numpy arrays from parquet) become lists."""
    out = []
    for i, rec in enumerate(frame.to_dict("records"), 1):
        row: dict[str, object] = {}
        for key, v in rec.items():
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
                v = v.tolist()
            row[str(key)] = v
        out.append((i, row))
    return out


def _check_count(name: str, value: int) -> None:
    """Raise ValueError unless ``value`` is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")


def _short(value: object) -> str:
    """repr-like rendering of ``value`` cut to MAX_VALUE_CHARS characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 3] + "..."
    return text


def _error(path: Path, line: int, fieldname: str, value: object, problem: str) -> DatasetError:
    """Build the standard error: ``file:line: field 'x' = value: problem``."""
    return DatasetError(f"{path}:{line}: field {fieldname!r} = {_short(value)}: {problem}")


# --------------------------------------------------------------------------- row validation


def _check_fields(
    path: Path, line: int, obj: Mapping[str, object], allowed: set[str], required: tuple[str, ...]
) -> None:
    """Reject missing required fields and unknown fields."""
    for name in required:
        if name not in obj:
            raise DatasetError(f"{path}:{line}: field {name!r} is missing (row keys: {_short(sorted(obj))})")
    for name in obj:
        if name not in allowed:
            raise _error(
                path,
                line,
                name,
                obj[name],
                f"unknown field (allowed: {', '.join(sorted(allowed))}; put extras in 'metadata')",
            )


def _id_field(path: Path, line: int, name: str, value: object) -> str:
    """Validate a non-empty, whitespace-trimmed string id."""
    if not isinstance(value, str):
        raise _error(path, line, name, value, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise _error(path, line, name, value, "must be a non-empty string")
    if value != value.strip():
        raise _error(path, line, name, value, "must not start or end with whitespace")
    return value


def _text_field(path: Path, line: int, name: str, value: object, *, non_blank: bool) -> str:
    """Validate a string field (optionally not blank)."""
    if not isinstance(value, str):
        raise _error(path, line, name, value, f"must be a string, got {type(value).__name__}")
    if non_blank and not value.strip():
        raise _error(path, line, name, value, "must not be empty or blank")
    return value


def _metadata_field(path: Path, line: int, value: object) -> dict[str, object]:
    """Validate the optional metadata object."""
    if not isinstance(value, dict):
        raise _error(path, line, "metadata", value, f"must be a JSON object, got {type(value).__name__}")
    return value


def _str_list(path: Path, line: int, name: str, value: object, *, ids: bool) -> list[str]:
    """Validate a list of strings (non-empty unique ids when ``ids``)."""
    if not isinstance(value, list):
        raise _error(path, line, name, value, f"must be a list of strings, got {type(value).__name__}")
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(item, str):
            raise _error(path, line, where, item, f"must be a string, got {type(item).__name__}")
        if ids:
            _id_field(path, line, where, item)
            if item in seen:
                raise _error(path, line, where, item, "duplicate id in the list")
            seen.add(item)
    return list(value)


def _relevance_field(path: Path, line: int, value: object, corpus_ids: set[str]) -> dict[str, int]:
    """Validate ``relevance``: ``{corpus id: integer grade >= 0}``."""
    if not isinstance(value, dict):
        raise _error(
            path, line, "relevance", value, f"must be a JSON object {{doc_id: grade}}, got {type(value).__name__}"
        )
    for doc, grade in value.items():
        where = f"relevance[{doc!r}]"
        if doc not in corpus_ids:
            raise _error(path, line, where, doc, f"unknown corpus id (not in {CORPUS_FILE})")
        if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
            raise _error(path, line, where, grade, "a grade must be an integer >= 0")
    return dict(value)


def _corpus_docs(path: Path, rows: Iterable[tuple[int, Mapping[str, object]]]) -> list[CorpusDoc]:
    """Validate ``corpus.jsonl`` rows (``(line, object)`` pairs): fields, ids unique, non-empty."""
    docs: list[CorpusDoc] = []
    first_line: dict[str, int] = {}
    for line, obj in rows:
        _check_fields(path, line, obj, _CORPUS_FIELDS, ("id", "text"))
        doc_id = _id_field(path, line, "id", obj["id"])
        if doc_id in first_line:
            raise _error(path, line, "id", doc_id, f"duplicate id (first seen on line {first_line[doc_id]})")
        first_line[doc_id] = line
        docs.append(
            CorpusDoc(
                id=doc_id,
                text=_text_field(path, line, "text", obj["text"], non_blank=True),
                title=_text_field(path, line, "title", obj.get("title", ""), non_blank=False),
                metadata=_metadata_field(path, line, obj.get("metadata", {})),
            )
        )
    if not docs:
        raise DatasetError(f"{path}: the corpus holds no documents")
    return docs


def _query_items(path: Path, rows: Iterable[tuple[int, Mapping[str, object]]], corpus_ids: set[str]) -> list[QueryItem]:
    """Validate ``queries.jsonl`` rows (``(line, object)`` pairs) against the corpus ids."""
    queries: list[QueryItem] = []
    first_line: dict[str, int] = {}
    for line, obj in rows:
        _check_fields(path, line, obj, _QUERY_FIELDS, ("id", "question", "answers", "gold_ids"))
        qid = _id_field(path, line, "id", obj["id"])
        if qid in first_line:
            raise _error(path, line, "id", qid, f"duplicate id (first seen on line {first_line[qid]})")
        first_line[qid] = line
        gold = _str_list(path, line, "gold_ids", obj["gold_ids"], ids=True)
        for i, g in enumerate(gold):
            if g not in corpus_ids:
                raise _error(path, line, f"gold_ids[{i}]", g, f"unknown corpus id (not in {CORPUS_FILE})")
        queries.append(
            QueryItem(
                id=qid,
                question=_text_field(path, line, "question", obj["question"], non_blank=True),
                answers=_str_list(path, line, "answers", obj["answers"], ids=False),
                gold_ids=gold,
                metadata=_metadata_field(path, line, obj.get("metadata", {})),
                relevance=_relevance_field(path, line, obj.get("relevance", {}), corpus_ids),
            )
        )
    if not queries:
        raise DatasetError(f"{path}: the file holds no queries")
    return queries
