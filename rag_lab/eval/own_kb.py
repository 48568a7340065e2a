"""Evaluating a knowledge base as it was built (``rag-lab eval --kb NAME --queries FILE``): the KB
that ``rag-lab ingest`` made and the user tuned, not a copy re-ingested from a dataset.

The questions file is JSONL, one question a line: ``question`` (required), ``id`` (default
``q<line>``), ``answers`` (reference answers, optional) and the gold as ``gold`` or ``gold_ids``: a
list naming each relevant document by its id, its source path (``docs/a.md`` as ingested from a
folder), its file name or its title — whichever is unique in the KB. A name that matches no
document, or several, fails with the file, line, field and value (and the candidates).

:func:`kb_dataset` returns a :class:`~rag_lab.eval.datasets.Dataset` whose corpus is the KB's
documents (text rebuilt from their chunks: the reference contexts of the ragas metrics) and whose
gold ids are the KB's document ids, which the pipeline's references carry.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.datasets.schema import Dataset, QueryItem
from rag_lab.eval.formats import jsonl_objects

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import Knowledge, KnowledgeBase
    from rag_lab.lab.lab import Lab

__all__ = ["kb_dataset"]


def _names(k: Knowledge) -> list[str]:
    """How a document can be named in a questions file, most specific first."""
    meta = getattr(k, "metadata", None) or {}
    return [str(x) for x in (k.id, meta.get("path"), k.file_name, k.title) if x]


def _resolver(lab: Lab, kb: KnowledgeBase) -> Callable[[str, str], str]:
    by_name: dict[str, set[str]] = {}
    ids = set()
    for k in lab.workspace.store.list_knowledge(kb.id):
        ids.add(k.id)
        for n in _names(k):
            by_name.setdefault(n.strip().casefold(), set()).add(k.id)

    def resolve(ref: str, where: str) -> str:
        if ref in ids:
            return ref
        hits = by_name.get(ref.strip().casefold(), set())
        if len(hits) == 1:
            return next(iter(hits))
        if hits:
            raise ValueError(
                f"{where}: {ref!r} names {len(hits)} documents of {kb.name!r} ({', '.join(sorted(hits)[:5])})"
            )
        close = sorted(n for n in by_name if ref.strip().casefold() in n)[:3]
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"{where}: no document of knowledge base {kb.name!r} has the id, path, file name or title {ref!r}{hint}"
        )

    return resolve


def kb_dataset(lab: Lab, kb_name: str, queries: str | Path) -> Dataset:
    """The questions of ``queries`` against KB ``kb_name`` as a dataset (see the module doc)."""
    from rag_lab.eval.testset.pipeline import kb_sources

    try:
        kb = lab.kb(kb_name, create=False)
    except (KeyError, LookupError, ValueError) as exc:
        raise ValueError(f"--kb {kb_name!r}: no such knowledge base in {lab.workspace.root} ({exc})") from None
    path = Path(queries)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"--queries {path}: cannot read it ({exc.strerror or exc})") from None
    resolve = _resolver(lab, kb)
    items: list[QueryItem] = []
    for where, row in jsonl_objects(path, "\n".join(lines)):
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"{where}: field 'question' = {question!r} must be a non-empty string")
        field = "gold" if "gold" in row else "gold_ids"
        gold = row.get(field, [])
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
            raise ValueError(f"{where}: field '{field}' = {gold!r} must be a non-empty list of document names")
        answers = row.get("answers", [])
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise ValueError(f"{where}: field 'answers' = {answers!r} must be a list of strings")
        qid = str(row.get("id") or f"q{where.rsplit(':', 1)[1]}")
        gold_ids = list(dict.fromkeys(resolve(g, f"{where}: field '{field}'") for g in gold))
        items.append(QueryItem(qid, question, list(answers), gold_ids))
    if not items:
        raise ValueError(f"--queries {path}: no question in the file")
    seen: set[str] = set()
    for q in items:
        if q.id in seen:
            raise ValueError(f"--queries {path}: question id {q.id!r} appears twice")
        seen.add(q.id)
    docs, _ = kb_sources(lab, kb)
    return Dataset(f"{kb_name}", path, docs, items)
