"""Putting an evaluation dataset into a lab: its corpus as documents of a knowledge base, its FAQ
entries into the FAQ knowledge base ``<kb>-faq``, and a question's earlier turns replayed into a
fresh session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag_lab.eval.datasets import Dataset

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

__all__ = ["dataset_documents", "faq_kb_name", "ingest_dataset"]


def dataset_documents(ds: Dataset) -> list[dict[str, Any]]:
    """The corpus as the documents ``Lab.ingest_documents`` takes."""
    return [{"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata} for d in ds.corpus]


def faq_kb_name(kb: str) -> str:
    return f"{kb}-faq"


def ingest_dataset(lab: Lab, ds: Dataset, kb: str, progress: bool = False) -> Any:
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


def _replay_history(lab: Lab, turns: Any) -> str:
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
