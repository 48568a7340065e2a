"""What every ingestion path shares (documents, FAQ entries, tables, images): the report, the
errors, content hashes, embedding with a shape check, removing a document, and the KB checks.

Below both :mod:`rag_lab.knowledge.ingestion` and :mod:`rag_lab.knowledge.tables` (and the
workspace), so none of them imports another to reach these (``tests/test_import_layers.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.retrieval.spaces import check_embedder as check_embedder

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder

DEFAULT_BATCH_SIZE = 64


class IngestError(ValueError):
    """Bad ingestion input; the message names the path / document, field and value."""


@dataclass(slots=True)
class IngestReport:
    """What one ingestion call did."""

    kb_id: str
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path or id, reason)
    #: files that could not be ingested (unreadable, not UTF-8, a bad table): (path, reason)
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: things the caller should know (e.g. Chinese text with an English-only embedder)
    warnings: list[str] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    vectors_added: int = 0
    #: texts the re-scorer and the answerer will embed (model passages, sentences) put into the
    #: workspace's vector cache at ingest (:mod:`rag_lab.knowledge.scored_texts`); 0 without one
    texts_prepared: int = 0
    seconds: float = 0.0

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated)

    def __str__(self) -> str:
        return (
            f"IngestReport(kb={self.kb_id}: {len(self.added)} added, {len(self.updated)} updated, "
            f"{len(self.unchanged)} unchanged, {len(self.skipped)} skipped, {len(self.failed)} failed; "
            f"{self.chunks_added} chunks added, {self.chunks_removed} removed, {self.vectors_added} vectors"
            + (f", {self.texts_prepared} rerank/answer texts cached" if self.texts_prepared else "")
            + f"; {self.seconds:.2f}s)"
        )

    def details(self, limit: int = 50) -> str:
        """Warnings, then the failed and skipped files, one per line with the reason ('' when
        there are none)."""
        lines = [f"  warning: {w}" for w in self.warnings]
        for title, items in (("failed", self.failed), ("skipped", self.skipped)):
            for path, reason in items[:limit]:
                lines.append(f"  {title}: {path}: {reason}")
            if len(items) > limit:
                lines.append(f"  … and {len(items) - limit} more {title}")
        return "\n".join(lines)


def _content_hash(title: str, text: str, metadata: Mapping[str, object], extra: object = None) -> str:
    h = hashlib.sha256()
    for part in (
        title,
        text,
        json.dumps(metadata, sort_keys=True, ensure_ascii=False, default=str),
        json.dumps(extra, sort_keys=True, ensure_ascii=False, default=str),
    ):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def _embed(embedder: Embedder, texts: list[str], where: str) -> np.ndarray:
    vecs = np.asarray(embedder.embed(texts), dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape != (len(texts), int(embedder.dimension)):
        raise IngestError(
            f"{where}: embedder {embedder.model_key!r} returned shape {vecs.shape}, expected "
            f"({len(texts)}, {embedder.dimension})"
        )
    return vecs


def _remove_document(ws: Workspace, kb: KnowledgeBase, knowledge_id: str) -> int:
    """Delete a document row and its chunks from the store and the indexes; returns the number
    of chunks removed. Indexes are not saved here."""
    chunk_ids = ws.store.delete_knowledge(kb.id, knowledge_id)
    vindex = ws.vector_index(kb)
    if vindex is not None:
        vindex.remove_chunks(chunk_ids)
    if kb.keyword_enabled:
        ws.keyword_index(kb).remove_chunks(chunk_ids)
    return len(chunk_ids)


def _check_kb(kb: KnowledgeBase, embedder: Embedder | None, want_faq: bool) -> None:
    if want_faq and kb.type != "faq":
        raise IngestError(f"knowledge base {kb.name!r} has type {kb.type!r}; FAQ entries need an 'faq' KB")
    if not want_faq and kb.type == "faq":
        raise IngestError(f"knowledge base {kb.name!r} is an FAQ KB; ingest its entries with ingest_faq")
    check_embedder(kb, embedder)
