"""The validating loader: JSON Lines rows checked field by field, errors naming file, line, field
and value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets.schema import (
    _CORPUS_FIELDS,
    _FAQ_FIELDS,
    _HISTORY_FIELDS,
    _QUERY_FIELDS,
    CORPUS_FILE,
    FAQ_FILE,
    HISTORY_FILE,
    QUERIES_FILE,
    CorpusDoc,
    Dataset,
    DatasetError,
    FAQItem,
    HistoryTurn,
    QueryItem,
    _error,
    _short,
    datasets_root,
    list_datasets,
)


def _iter_rows(path: Path, skipped: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, JSON object) for each non-blank line of ``path``."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    for lineno, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
        if lineno == 1 and text.startswith("\ufeff"):
            text = text[1:]
        if not text.strip():
            skipped.append(f"{path}:{lineno}: blank line skipped")
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}:{lineno}: invalid JSON ({exc.msg} at column {exc.colno}): {_short(text)}"
            ) from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{lineno}: row must be a JSON object, got {type(obj).__name__}: {_short(obj)}")
        yield lineno, obj


def _check_fields(path: Path, line: int, obj: dict[str, Any], allowed: set[str], required: tuple[str, ...]) -> None:
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


def _id_field(path: Path, line: int, name: str, value: Any) -> str:
    """Validate a non-empty, whitespace-trimmed string id."""
    if not isinstance(value, str):
        raise _error(path, line, name, value, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise _error(path, line, name, value, "must be a non-empty string")
    if value != value.strip():
        raise _error(path, line, name, value, "must not start or end with whitespace")
    return value


def _text_field(path: Path, line: int, name: str, value: Any, *, non_blank: bool) -> str:
    """Validate a string field (optionally not blank)."""
    if not isinstance(value, str):
        raise _error(path, line, name, value, f"must be a string, got {type(value).__name__}")
    if non_blank and not value.strip():
        raise _error(path, line, name, value, "must not be empty or blank")
    return value


def _metadata_field(path: Path, line: int, value: Any) -> dict[str, Any]:
    """Validate the optional metadata object."""
    if not isinstance(value, dict):
        raise _error(path, line, "metadata", value, f"must be a JSON object, got {type(value).__name__}")
    return value


def _str_list(path: Path, line: int, name: str, value: Any, *, ids: bool) -> list[str]:
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


def _relevance_field(path: Path, line: int, value: Any, corpus_ids: set[str]) -> dict[str, int]:
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


def _load_corpus(path: Path, skipped: list[str]) -> list[CorpusDoc]:
    """Parse and validate ``corpus.jsonl``."""
    docs: list[CorpusDoc] = []
    first_line: dict[str, int] = {}
    for line, obj in _iter_rows(path, skipped):
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


def _load_queries(path: Path, corpus_ids: set[str], skipped: list[str]) -> list[QueryItem]:
    """Parse and validate ``queries.jsonl`` against the corpus ids."""
    queries: list[QueryItem] = []
    first_line: dict[str, int] = {}
    for line, obj in _iter_rows(path, skipped):
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


def _resolve(path_or_name: str | Path) -> Path:
    """A bare name (no path separator) that exists under datasets_root() wins; else a path."""
    if isinstance(path_or_name, str) and path_or_name and "/" not in path_or_name and "\\" not in path_or_name:
        candidate = datasets_root() / path_or_name
        if candidate.is_dir():
            return candidate
    path = Path(path_or_name)
    if path.is_dir():
        return path
    raise DatasetError(
        f"dataset {str(path_or_name)!r} not found: neither a folder nor a name under {datasets_root()} "
        f"(available: {', '.join(list_datasets()) or 'none'})"
    )


def load_dataset(path_or_name: str | Path) -> Dataset:
    """Load and validate a dataset folder, or a dataset of the repo's ``datasets/`` by name."""
    folder = _resolve(path_or_name)
    skipped: list[str] = []
    corpus = _load_corpus(folder / CORPUS_FILE, skipped)
    queries = _load_queries(folder / QUERIES_FILE, {d.id for d in corpus}, skipped)
    faq = _load_faq(folder / FAQ_FILE, skipped) if (folder / FAQ_FILE).is_file() else []
    history = (
        _load_history(folder / HISTORY_FILE, {q.id for q in queries}, skipped)
        if (folder / HISTORY_FILE).is_file()
        else {}
    )
    return Dataset(
        name=folder.resolve().name,
        path=folder.resolve(),
        corpus=corpus,
        queries=queries,
        skipped_lines=skipped,
        faq=faq,
        history=history,
    )


def _load_faq(path: Path, skipped: list[str]) -> list[FAQItem]:
    """``faq.jsonl`` rows ``{"id", "question", "answers": [...], "similar_questions"?, "negative_questions"?}``."""
    items: list[FAQItem] = []
    seen: dict[str, int] = {}
    for line, obj in _iter_rows(path, skipped):
        _check_fields(path, line, obj, _FAQ_FIELDS, ("id", "question", "answers"))
        fid = _id_field(path, line, "id", obj["id"])
        if fid in seen:
            raise _error(path, line, "id", fid, f"duplicate id (first seen on line {seen[fid]})")
        seen[fid] = line
        answers = _str_list(path, line, "answers", obj["answers"], ids=False)
        if not any(a.strip() for a in answers):
            raise _error(path, line, "answers", answers, "an FAQ entry needs at least one non-blank answer")
        items.append(
            FAQItem(
                id=fid,
                question=_text_field(path, line, "question", obj["question"], non_blank=True),
                answers=answers,
                similar_questions=_str_list(
                    path, line, "similar_questions", obj.get("similar_questions", []), ids=False
                ),
                negative_questions=_str_list(
                    path, line, "negative_questions", obj.get("negative_questions", []), ids=False
                ),
            )
        )
    return items


def _load_history(path: Path, query_ids: set[str], skipped: list[str]) -> dict[str, list[HistoryTurn]]:
    """``history.jsonl`` rows ``{"query_id", "turns": [{"question", "answer"}, ...]}``."""
    out: dict[str, list[HistoryTurn]] = {}
    for line, obj in _iter_rows(path, skipped):
        _check_fields(path, line, obj, _HISTORY_FIELDS, ("query_id", "turns"))
        qid = _id_field(path, line, "query_id", obj["query_id"])
        if qid not in query_ids:
            raise _error(path, line, "query_id", qid, f"unknown query id (not in {QUERIES_FILE})")
        if qid in out:
            raise _error(path, line, "query_id", qid, "a second history for the same query")
        turns = obj["turns"]
        if not isinstance(turns, list):
            raise _error(path, line, "turns", turns, "must be a list of {question, answer} objects")
        parsed = []
        for i, t in enumerate(turns):
            if not isinstance(t, dict) or set(t) != {"question", "answer"}:
                raise _error(path, line, f"turns[{i}]", t, "must be an object with exactly 'question' and 'answer'")
            parsed.append(
                HistoryTurn(
                    _text_field(path, line, f"turns[{i}].question", t["question"], non_blank=True),
                    _text_field(path, line, f"turns[{i}].answer", t["answer"], non_blank=True),
                )
            )
        out[qid] = parsed
    return out
