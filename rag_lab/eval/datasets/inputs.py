"""Datasets from the formats people already have: ragas / Hugging Face-style JSONL and
``ragas.EvaluationDataset`` objects, TREC topics + qrels, pandas DataFrames (``Dataset.from_frame``).

Every reader builds the native rows and validates them with the same functions as ``queries.jsonl``
(:func:`~rag_lab.eval.datasets.schema._query_items`), so errors name the file, the 1-based line and
the field in the same words.

* **ragas JSONL** (``EvaluationDataset.to_jsonl``, what ``rag-lab eval --export ragas`` writes; the
  HF-style rows have the same keys): ``user_input`` → question, ``reference`` → answers,
  ``reference_contexts`` → gold documents. With a corpus, each reference context is matched to the
  document whose text equals it (whitespace-trimmed), else to the one document containing it; a
  context matching none is an error. Without a corpus, the distinct reference contexts *are* the
  corpus (id ``ctx-`` + 12 hex digits of the text's SHA-256). An optional ``id`` key names the
  question (default ``q<line>``).
* **TREC**: topics as ``qid<TAB>text`` lines (MS MARCO / BEIR ``queries.tsv``) or SGML
  ``<top><num>…<title>…</top>`` blocks, qrels ``qid iter docid grade``; gold ids are the documents
  with grade > 0, and the grades go to ``relevance`` (graded nDCG) when any differs from 0/1. The
  corpus comes from a ``corpus.jsonl``. A topic without qrels is left out (listed in
  ``skipped_lines``), as trec_eval leaves it out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.datasets.loading import _iter_rows, _load_corpus
from rag_lab.eval.datasets.schema import (
    CorpusDoc,
    Dataset,
    DatasetError,
    _error,
    _query_items,
)

if TYPE_CHECKING:  # pragma: no cover
    from ragas import EvaluationDataset

__all__ = ["from_ragas_dataset", "read_ragas_jsonl", "read_trec"]


def _context_id(text: str) -> str:
    return "ctx-" + hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def _as_corpus(corpus: str | Path | Sequence[CorpusDoc] | None) -> list[CorpusDoc] | None:
    if corpus is None:
        return None
    if isinstance(corpus, (str, Path)):
        p = Path(corpus)
        return _load_corpus(p / "corpus.jsonl" if p.is_dir() else p, [])
    return list(corpus)


def _ragas_rows(
    path: Path, rows: Iterable[tuple[int, dict[str, object]]], corpus: list[CorpusDoc] | None
) -> tuple[list[CorpusDoc], list[tuple[int, dict[str, object]]]]:
    """Native query rows (and the corpus) from ragas sample rows."""
    by_text = {d.text.strip(): d.id for d in corpus} if corpus is not None else None
    own: dict[str, CorpusDoc] = {}
    native = []
    for line, obj in rows:
        q = obj.get("user_input")
        if not isinstance(q, str) or not q.strip():
            raise _error(path, line, "user_input", q, "must be a non-empty string (a single-turn sample)")
        ref = obj.get("reference")
        if ref is not None and not isinstance(ref, str):
            raise _error(path, line, "reference", ref, f"must be a string or null, got {type(ref).__name__}")
        ctxs = obj.get("reference_contexts")
        if not isinstance(ctxs, list) or not ctxs:
            raise _error(path, line, "reference_contexts", ctxs, "must be a non-empty list (the gold contexts)")
        gold: list[str] = []
        for i, c in enumerate(ctxs):
            where = f"reference_contexts[{i}]"
            if not isinstance(c, str) or not c.strip():
                raise _error(path, line, where, c, "must be a non-empty string")
            if by_text is None:
                doc = own.setdefault(c.strip(), CorpusDoc(id=_context_id(c), text=c.strip()))
                did = doc.id
            else:
                did = by_text.get(c.strip()) or _containing(path, line, where, c.strip(), corpus or [])
            if did not in gold:
                gold.append(did)
        qid = obj.get("id", f"q{line}")
        native.append((line, {"id": qid, "question": q, "answers": [ref] if ref else [], "gold_ids": gold}))
    return (list(own.values()) if corpus is None else corpus), native


def _containing(path: Path, line: int, where: str, text: str, corpus: list[CorpusDoc]) -> str:
    hits = [d.id for d in corpus if text in d.text]
    if len(hits) != 1:
        problem = "matches no corpus document" if not hits else f"is in {len(hits)} corpus documents"
        raise _error(path, line, where, text, problem)
    return hits[0]


def read_ragas_jsonl(
    path: str | Path, corpus: str | Path | Sequence[CorpusDoc] | None = None, name: str | None = None
) -> Dataset:
    """A dataset from a ragas / HF-style JSONL file (see the module docstring)."""
    p = Path(path)
    skipped: list[str] = []
    docs, native = _ragas_rows(p, _iter_rows(p, skipped), _as_corpus(corpus))
    queries = _query_items(p, native, {d.id for d in docs})
    return Dataset(name or p.stem, p.resolve().parent, docs, queries, skipped_lines=skipped)


def from_ragas_dataset(
    dataset: EvaluationDataset, corpus: str | Path | Sequence[CorpusDoc] | None = None, name: str = "ragas"
) -> Dataset:
    """A dataset from a ``ragas.EvaluationDataset`` (rows numbered from 1 in the errors)."""
    label = Path(f"<ragas {name}>")
    rows = [(i, s.model_dump() if hasattr(s, "model_dump") else dict(s)) for i, s in enumerate(dataset.samples, 1)]
    docs, native = _ragas_rows(label, rows, _as_corpus(corpus))
    return Dataset(name, label, docs, _query_items(label, native, {d.id for d in docs}))


_SGML_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_SGML_NUM = re.compile(r"<num>\s*(?:Number:)?\s*(\S+)", re.I)
_SGML_TITLE = re.compile(r"<title>\s*(?:Topic:)?\s*(.*?)\s*(?=<|\Z)", re.S | re.I)


def _read_topics(path: Path) -> list[tuple[int, str, str]]:
    """``(line, qid, text)`` per topic."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8-sig")
    out = []
    if "<top>" in text.lower():
        for m in _SGML_TOP.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            num, title = _SGML_NUM.search(m.group(1)), _SGML_TITLE.search(m.group(1))
            if num is None:
                raise _error(path, line, "num", m.group(1)[:40], "a <top> block needs a <num>")
            if title is None or not title.group(1).strip():
                raise _error(path, line, "title", num.group(1), "a <top> block needs a non-empty <title>")
            out.append((line, num.group(1), " ".join(title.group(1).split())))
        return out
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        qid, sep, q = raw.partition("\t")
        if not sep:
            raise _error(path, line, "text", raw, "a topics line is 'qid<TAB>text'")
        out.append((line, qid.strip(), q.strip()))
    return out


def _read_qrels(path: Path, topics: set[str], corpus_ids: set[str]) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    out: dict[str, dict[str, int]] = {}
    for line, raw in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if not raw.strip():
            continue
        parts = raw.split()
        if len(parts) != 4:
            raise _error(path, line, "line", raw, f"a qrels line has 4 fields (qid iter docid grade), got {len(parts)}")
        qid, _, doc, grade = parts
        if qid not in topics:
            raise _error(path, line, "qid", qid, "not a topic of the topics file")
        if doc not in corpus_ids:
            raise _error(path, line, "docid", doc, "unknown corpus id (not in the corpus)")
        try:
            g = int(grade)
        except ValueError:
            raise _error(path, line, "grade", grade, "must be an integer") from None
        if g < 0:
            raise _error(path, line, "grade", g, "must be >= 0 (negative grades are not supported)")
        out.setdefault(qid, {})[doc] = g
    return out


def read_trec(
    topics: str | Path, qrels: str | Path, corpus: str | Path | Sequence[CorpusDoc], name: str | None = None
) -> Dataset:
    """A dataset from TREC topics, qrels and a corpus (see the module docstring)."""
    tp, qp = Path(topics), Path(qrels)
    docs = _as_corpus(corpus) or []
    ids = {d.id for d in docs}
    top = _read_topics(tp)
    grades = _read_qrels(qp, {qid for _, qid, _ in top}, ids)
    skipped: list[str] = []
    native = []
    for line, qid, text in top:
        g = grades.get(qid)
        if not g or not any(v > 0 for v in g.values()):
            skipped.append(f"{tp}:{line}: topic {qid!r} has no relevant document in {qp}: left out")
            continue
        row: dict[str, object] = {
            "id": qid,
            "question": text,
            "answers": [],
            "gold_ids": [d for d, v in g.items() if v > 0],
        }
        if any(v not in (0, 1) for v in g.values()):
            row["relevance"] = dict(g)
        native.append((line, row))
    return Dataset(name or tp.stem, tp.resolve().parent, docs, _query_items(tp, native, ids), skipped_lines=skipped)
