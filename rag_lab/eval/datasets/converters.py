"""Writing datasets (the one JSON Lines writer, :func:`jsonl_bytes`) and converting SQuAD-style
JSON and BEIR folders into the format."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from rag_lab.eval.datasets.loading import _iter_rows, load_dataset
from rag_lab.eval.datasets.schema import (
    CORPUS_FILE,
    QUERIES_FILE,
    CorpusDoc,
    Dataset,
    DatasetError,
    QueryItem,
    _error,
    _id_field,
    _metadata_field,
    _short,
    _text_field,
)

# --------------------------------------------------------------------------- writing and converting


def jsonl_bytes(rows: Iterable[Mapping[str, object]]) -> bytes:
    """Rows as UTF-8 JSON Lines: one object per ``\\n``-terminated line, keys in the given order,
    non-ASCII kept. Every dataset file rag_lab writes goes through this function."""
    return b"".join(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n" for r in rows)


def corpus_row(d: CorpusDoc) -> dict[str, object]:
    """The ``corpus.jsonl`` object of a document (``metadata`` only when not empty)."""
    row: dict[str, object] = {"id": d.id, "title": d.title, "text": d.text}
    if d.metadata:
        row["metadata"] = d.metadata
    return row


def query_row(q: QueryItem) -> dict[str, object]:
    """The ``queries.jsonl`` object of a query (``metadata`` only when not empty)."""
    row: dict[str, object] = {"id": q.id, "question": q.question, "answers": q.answers, "gold_ids": q.gold_ids}
    if q.metadata:
        row["metadata"] = q.metadata
    if q.relevance:
        row["relevance"] = q.relevance
    return row


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
    (out / CORPUS_FILE).write_bytes(jsonl_bytes(corpus_row(d) for d in corpus))
    (out / QUERIES_FILE).write_bytes(jsonl_bytes(query_row(q) for q in queries))
    return load_dataset(out)


def _jpath_error(path: Path, where: str, value: object, problem: str) -> DatasetError:
    return DatasetError(f"{path}: {where} = {_short(value)}: {problem}")


def _read_json(path: Path) -> object:
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def _need_str(path: Path, where: str, value: object, *, non_blank: bool = True) -> str:
    if not isinstance(value, str):
        raise _jpath_error(path, where, value, f"must be a string, got {type(value).__name__}")
    if non_blank and not value.strip():
        raise _jpath_error(path, where, value, "must not be empty or blank")
    return value


def _need_list(path: Path, where: str, value: object) -> list[object]:
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
                meta: dict[str, object] = {"answer_starts": starts} if starts else {}
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


def _iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
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
