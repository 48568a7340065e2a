"""The validating loader: JSON Lines rows checked field by field, errors naming file, line, field
and value."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from rag_lab.eval.datasets.schema import (
    _FAQ_FIELDS,
    _HISTORY_FIELDS,
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
    _check_fields,
    _corpus_docs,
    _error,
    _id_field,
    _query_items,
    _short,
    _str_list,
    _text_field,
    datasets_root,
    is_rejected,
    list_datasets,
)


def _iter_rows(path: Path, skipped: list[str]) -> Iterator[tuple[int, dict[str, object]]]:
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


def _load_corpus(path: Path, skipped: list[str]) -> list[CorpusDoc]:
    """Parse and validate ``corpus.jsonl``."""
    return _corpus_docs(path, _iter_rows(path, skipped))


def _load_queries(path: Path, corpus_ids: set[str], skipped: list[str]) -> list[QueryItem]:
    """Parse and validate ``queries.jsonl`` against the corpus ids."""
    return _query_items(path, _iter_rows(path, skipped), corpus_ids)


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
    rows = _load_queries(folder / QUERIES_FILE, {d.id for d in corpus}, skipped)
    queries = [q for q in rows if not is_rejected(q)]
    if not queries:
        raise DatasetError(f"{folder / QUERIES_FILE}: every question ({len(rows)}) was rejected by a reviewer")
    faq = _load_faq(folder / FAQ_FILE, skipped) if (folder / FAQ_FILE).is_file() else []
    history = (
        _load_history(folder / HISTORY_FILE, {q.id for q in rows}, skipped) if (folder / HISTORY_FILE).is_file() else {}
    )
    return Dataset(
        name=folder.resolve().name,
        path=folder.resolve(),
        corpus=corpus,
        queries=queries,
        skipped_lines=skipped,
        faq=faq,
        history={q.id: history[q.id] for q in queries if q.id in history},
        rejected=[q for q in rows if is_rejected(q)],
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
