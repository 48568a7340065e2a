"""Evaluation datasets: the on-disk format, a validating loader and deterministic subsets.

A dataset is a folder with two JSON Lines files (UTF-8, one JSON object per ``\\n``-terminated
line; see ``datasets/README.md``)::

    corpus.jsonl   {"id": str, "title": str, "text": str, "metadata": {...}}
    queries.jsonl  {"id": str, "question": str, "answers": [str, ...],
                    "gold_ids": [corpus id, ...], "metadata": {...}}

``title`` and ``metadata`` are optional (default ``""`` and ``{}``); every other field is
required. A corpus id is the document (knowledge) id the pipeline reports for a retrieved chunk,
so ``gold_ids`` are compared with retrieved knowledge ids.

Validation errors raise :class:`DatasetError` naming the file, the 1-based line, the field and the
offending value (shortened to 80 characters). Blank lines are skipped and listed in
:attr:`Dataset.skipped_lines`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import rag_lab

__all__ = [
    "CorpusDoc",
    "FAQItem",
    "HistoryTurn",
    "Dataset",
    "DatasetError",
    "QueryItem",
    "convert_beir",
    "convert_squad",
    "datasets_root",
    "list_datasets",
    "load_dataset",
    "write_dataset",
]

CORPUS_FILE = "corpus.jsonl"
FAQ_FILE = "faq.jsonl"
HISTORY_FILE = "history.jsonl"
QUERIES_FILE = "queries.jsonl"
MAX_VALUE_CHARS = 80

_CORPUS_FIELDS = {"id", "title", "text", "metadata"}
_QUERY_FIELDS = {"id", "question", "answers", "gold_ids", "metadata"}
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

    def subset(self, n_queries: int, max_docs: int | None = None, seed: int = 0) -> Dataset:
        """The first ``n_queries`` queries, all their gold docs, and other docs up to ``max_docs``.

        Distractors are drawn with ``random.Random(seed)``; the kept documents stay in corpus
        order. ``max_docs=None`` keeps the whole corpus. Raises ValueError when the gold documents
        alone exceed ``max_docs``.
        """
        _check_count("n_queries", n_queries)
        queries = list(self.queries[:n_queries])
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


# --------------------------------------------------------------------------- loading


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


# --------------------------------------------------------------------------- writing and converting


def _json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n"


def write_dataset(
    corpus: list[CorpusDoc], queries: list[QueryItem], out_dir: str | Path, *, overwrite: bool = False
) -> Dataset:
    """Write ``corpus.jsonl`` and ``queries.jsonl`` under ``out_dir`` and load them back (so the
    result is validated exactly as any dataset is). Refuses to replace existing files unless
    ``overwrite``."""
    out = Path(out_dir)
    for fname in (CORPUS_FILE, QUERIES_FILE):
        if (out / fname).exists() and not overwrite:
            raise DatasetError(f"{out / fname}: exists (pass overwrite=True / --overwrite to replace it)")
    out.mkdir(parents=True, exist_ok=True)
    with (out / CORPUS_FILE).open("w", encoding="utf-8", newline="\n") as fh:
        for d in corpus:
            row: dict[str, Any] = {"id": d.id, "title": d.title, "text": d.text}
            if d.metadata:
                row["metadata"] = d.metadata
            fh.write(_json_line(row))
    with (out / QUERIES_FILE).open("w", encoding="utf-8", newline="\n") as fh:
        for q in queries:
            row = {"id": q.id, "question": q.question, "answers": q.answers, "gold_ids": q.gold_ids}
            if q.metadata:
                row["metadata"] = q.metadata
            fh.write(_json_line(row))
    return load_dataset(out)


def _jpath_error(path: Path, where: str, value: Any, problem: str) -> DatasetError:
    return DatasetError(f"{path}: {where} = {_short(value)}: {problem}")


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def _need_str(path: Path, where: str, value: Any, *, non_blank: bool = True) -> str:
    if not isinstance(value, str):
        raise _jpath_error(path, where, value, f"must be a string, got {type(value).__name__}")
    if non_blank and not value.strip():
        raise _jpath_error(path, where, value, "must not be empty or blank")
    return value


def _need_list(path: Path, where: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _jpath_error(path, where, value, f"must be a list, got {type(value).__name__}")
    return value


def convert_squad(
    json_path: str | Path, out_dir: str | Path, *, skip_impossible: bool = False, overwrite: bool = False
) -> Dataset:
    """SQuAD-style JSON (SQuAD 1.1/2.0, CMRC 2018, DRCD…) → this format.

    Each paragraph becomes a corpus document (id: the paragraph's ``id`` when it has one, else
    ``<article index>-<paragraph index>``; title: the article title); each question becomes a query
    whose gold id is its paragraph and whose answers are the distinct answer texts in order
    (offsets kept in ``metadata.answer_starts``). SQuAD 2.0 unanswerable questions keep their
    paragraph as gold, have no answers and ``metadata.is_impossible``; ``skip_impossible`` drops
    them. Errors name the file and the JSON path of the bad value.
    """
    path = Path(json_path)
    data = _read_json(path)
    if not isinstance(data, dict) or "data" not in data:
        raise _jpath_error(
            path,
            "<root>",
            data if not isinstance(data, dict) else sorted(data),
            "expected an object with a 'data' list of articles",
        )
    corpus: list[CorpusDoc] = []
    queries: list[QueryItem] = []
    doc_ids: set[str] = set()
    qids: set[str] = set()
    for ai, article in enumerate(_need_list(path, "data", data["data"])):
        where_a = f"data[{ai}]"
        if not isinstance(article, dict):
            raise _jpath_error(path, where_a, article, "must be an object")
        title = _need_str(path, f"{where_a}.title", article.get("title", ""), non_blank=False)
        for pi, para in enumerate(_need_list(path, f"{where_a}.paragraphs", article.get("paragraphs"))):
            where_p = f"{where_a}.paragraphs[{pi}]"
            if not isinstance(para, dict):
                raise _jpath_error(path, where_p, para, "must be an object")
            context = _need_str(path, f"{where_p}.context", para.get("context"))
            pid = para.get("id")
            doc_id = _need_str(path, f"{where_p}.id", pid).strip() if pid is not None else f"{ai}-{pi}"
            if doc_id in doc_ids:
                raise _jpath_error(path, f"{where_p}.id", doc_id, "duplicate paragraph id")
            doc_ids.add(doc_id)
            corpus.append(
                CorpusDoc(id=doc_id, text=context, title=title, metadata={"article_index": ai, "paragraph_index": pi})
            )
            for qi, qa in enumerate(_need_list(path, f"{where_p}.qas", para.get("qas", []))):
                where_q = f"{where_p}.qas[{qi}]"
                if not isinstance(qa, dict):
                    raise _jpath_error(path, where_q, qa, "must be an object")
                qid = _need_str(path, f"{where_q}.id", qa.get("id", f"{doc_id}-q{qi}")).strip()
                if qid in qids:
                    raise _jpath_error(path, f"{where_q}.id", qid, "duplicate question id")
                qids.add(qid)
                question = _need_str(path, f"{where_q}.question", qa.get("question"))
                impossible = bool(qa.get("is_impossible", False))
                if impossible and skip_impossible:
                    continue
                answers: list[str] = []
                starts: list[int] = []
                for ni, ans in enumerate(_need_list(path, f"{where_q}.answers", qa.get("answers", []))):
                    where_n = f"{where_q}.answers[{ni}]"
                    if not isinstance(ans, dict):
                        raise _jpath_error(path, where_n, ans, "must be an object with 'text'")
                    text = _need_str(path, f"{where_n}.text", ans.get("text"), non_blank=False)
                    if text and text not in answers:
                        answers.append(text)
                        start = ans.get("answer_start")
                        if isinstance(start, int) and not isinstance(start, bool):
                            starts.append(start)
                meta: dict[str, Any] = {"answer_starts": starts} if starts else {}
                if impossible:
                    meta["is_impossible"] = True
                queries.append(
                    QueryItem(id=qid, question=question.strip(), answers=answers, gold_ids=[doc_id], metadata=meta)
                )
    if not corpus:
        raise DatasetError(f"{path}: no paragraphs found under data[*].paragraphs")
    if not queries:
        raise DatasetError(f"{path}: no questions found under data[*].paragraphs[*].qas")
    return write_dataset(corpus, queries, out_dir, overwrite=overwrite)


def _iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    skipped: list[str] = []
    yield from _iter_rows(path, skipped)


def convert_beir(
    beir_dir: str | Path, out_dir: str | Path, *, split: str = "test", min_score: int = 1, overwrite: bool = False
) -> Dataset:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) → this format.

    Corpus rows ``{"_id", "title", "text", "metadata"?}``; query rows ``{"_id", "text"}``; qrels
    ``query-id<TAB>corpus-id<TAB>score`` with a header line. Queries listed in the split's qrels are
    kept, in ``queries.jsonl`` order; gold ids are the documents with ``score >= min_score``
    (graded scores are kept in ``metadata.qrels``); BEIR has no reference answers (``answers``
    empty). Errors name the file, line and field.
    """
    root = Path(beir_dir)
    corpus: list[CorpusDoc] = []
    seen_docs: dict[str, int] = {}
    cpath = root / "corpus.jsonl"
    for line, obj in _iter_jsonl(cpath):
        did = obj.get("_id")
        if isinstance(did, int) and not isinstance(did, bool):
            did = str(did)
        did = _id_field(cpath, line, "_id", did)
        if did in seen_docs:
            raise _error(cpath, line, "_id", did, f"duplicate id (first seen on line {seen_docs[did]})")
        seen_docs[did] = line
        text = _text_field(cpath, line, "text", obj.get("text"), non_blank=False)
        title = _text_field(cpath, line, "title", obj.get("title", "") or "", non_blank=False)
        if not text.strip():
            if not title.strip():
                raise _error(cpath, line, "text", text, "document has neither text nor title")
            text = title
        meta = obj.get("metadata") or {}
        corpus.append(CorpusDoc(id=did, text=text, title=title, metadata=_metadata_field(cpath, line, meta)))
    qpath = root / QUERIES_FILE
    qtext: dict[str, str] = {}
    qorder: list[str] = []
    for line, obj in _iter_jsonl(qpath):
        qid = obj.get("_id")
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        qid = _id_field(qpath, line, "_id", qid)
        if qid in qtext:
            raise _error(qpath, line, "_id", qid, "duplicate id")
        qtext[qid] = _text_field(qpath, line, "text", obj.get("text"), non_blank=True)
        qorder.append(qid)
    rpath = root / "qrels" / f"{split}.tsv"
    if not rpath.is_file():
        available = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        raise DatasetError(f"{rpath}: file not found (splits available: {', '.join(available) or 'none'})")
    qrels: dict[str, dict[str, int]] = {}
    for lineno, raw in enumerate(rpath.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not raw.strip():
            continue
        cols = raw.split("\t")
        if lineno == 1 and len(cols) == 3 and not cols[2].strip().lstrip("-").isdigit():
            continue  # header
        if len(cols) != 3:
            raise DatasetError(
                f"{rpath}:{lineno}: expected 3 tab-separated columns (query-id, corpus-id, score), "
                f"got {len(cols)}: {_short(raw)}"
            )
        qid, did, score_s = (c.strip() for c in cols)
        try:
            score = int(score_s)
        except ValueError:
            raise DatasetError(f"{rpath}:{lineno}: field 'score' = {_short(score_s)}: must be an integer") from None
        if qid not in qtext:
            raise DatasetError(
                f"{rpath}:{lineno}: field 'query-id' = {_short(qid)}: unknown query id (not in {QUERIES_FILE})"
            )
        if did not in seen_docs:
            raise DatasetError(
                f"{rpath}:{lineno}: field 'corpus-id' = {_short(did)}: unknown corpus id (not in corpus.jsonl)"
            )
        qrels.setdefault(qid, {})[did] = score
    queries = [
        QueryItem(
            id=q,
            question=qtext[q].strip(),
            answers=[],
            gold_ids=[d for d, s in qrels[q].items() if s >= min_score],
            metadata={"qrels": dict(qrels[q]), "split": split},
        )
        for q in qorder
        if q in qrels
    ]
    if not queries:
        raise DatasetError(f"{rpath}: no query of {QUERIES_FILE} has relevance judgements in this split")
    return write_dataset(corpus, queries, out_dir, overwrite=overwrite)
