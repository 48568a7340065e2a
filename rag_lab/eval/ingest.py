"""Putting an evaluation dataset into a lab: its corpus as documents of a knowledge base, its FAQ
entries into the FAQ knowledge base ``<kb>-faq``, and a question's earlier turns replayed into a
fresh session."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from rag_lab.eval.datasets import Dataset

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.ingest_common import IngestReport
    from rag_lab.lab.lab import Lab

__all__ = ["corpus_digest", "dataset_documents", "eval_kb_name", "faq_kb_name", "ingest_dataset"]

#: hex digits of :func:`corpus_digest` in an eval KB name (40 bits: a clash needs ~10^6 slices)
KB_DIGEST_CHARS = 10


def corpus_digest(ds: Dataset) -> str:
    """SHA-256 of the exact document set: every corpus document (id, title, text, metadata) and
    every FAQ entry, sorted by id, so the order of the files does not matter."""
    import hashlib
    import json

    h = hashlib.sha256()
    for d in sorted(ds.corpus, key=lambda d: d.id):
        row = [d.id, d.title, d.text, d.metadata]
        h.update(json.dumps(row, ensure_ascii=False, sort_keys=True, default=str).encode() + b"\n")
    h.update(b"faq\n")
    for f in sorted(ds.faq, key=lambda f: f.id):
        row = [f.id, f.question, f.answers, f.similar_questions, f.negative_questions]
        h.update(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    return h.hexdigest()


def eval_kb_name(name: str, ds: Dataset) -> str:
    """The knowledge base an evaluation of ``ds`` (a dataset or one of its slices) uses:
    ``eval-<name>-<N>d-<digest>``, N the number of documents and the digest the first
    :data:`KB_DIGEST_CHARS` hex digits of :func:`corpus_digest`.

    The name follows the exact document set, not the slice's spec: ingestion only adds, so
    ``tinyds:4:6`` then ``tinyds:1:6`` (the same ``max_docs``, other gold documents) used to share
    ``eval-tinyds-d6-s0`` and the second slice was scored against nine documents. Two slices with
    the same documents share a KB; a changed dataset file gets a fresh one."""
    return f"eval-{name}-{len(ds.corpus)}d-{corpus_digest(ds)[:KB_DIGEST_CHARS]}"


def dataset_documents(ds: Dataset) -> list[dict[str, object]]:
    """The corpus as the documents ``Lab.ingest_documents`` takes."""
    return [{"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata} for d in ds.corpus]


def faq_kb_name(kb: str) -> str:
    return f"{kb}-faq"


def ingest_dataset(lab: Lab, ds: Dataset, kb: str, progress: bool = False) -> IngestReport:
    """Ingest ``ds``'s corpus into knowledge base ``kb`` (idempotent by content hash), and its
    optional FAQ entries into the FAQ knowledge base ``<kb>-faq``."""
    report = lab.ingest_documents(dataset_documents(ds), kb=kb, progress=progress)
    if ds.faq:
        from rag_lab.knowledge.models import FAQEntry

        faq_kb = lab.kb(faq_kb_name(kb), kb_type="faq")
        entries = [
            {
                "id": f.id,
                **FAQEntry(
                    f.question,
                    answers=list(f.answers),
                    similar_questions=list(f.similar_questions),
                    negative_questions=list(f.negative_questions),
                ).to_metadata(),
            }
            for f in ds.faq
        ]
        lab.workspace.ingest_faq(faq_kb, entries, lab.embedder, progress=progress)
    return report


class _Turn(Protocol):
    """An earlier turn to replay (a dataset's :class:`~rag_lab.eval.datasets.HistoryTurn`)."""

    @property
    def question(self) -> str: ...
    @property
    def answer(self) -> str: ...


def _replay_history(lab: Lab, turns: Iterable[_Turn]) -> str:
    """A fresh session holding the query's earlier turns; its id."""
    import uuid

    sid = f"eval-{uuid.uuid4()}"
    store = lab.services.messages
    if store is None:
        raise ValueError("replaying a dataset's history needs the lab's session store (services.messages)")
    store.ensure_session(sid, "lab")
    for t in turns:
        rid = str(uuid.uuid4())
        store.add_message(sid, "user", t.question, rid)
        store.add_message(sid, "assistant", t.answer, rid)
    return sid
