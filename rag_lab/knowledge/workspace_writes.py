"""Writing to a workspace's KBs: ingesting folders, documents and FAQ entries
(:mod:`rag_lab.knowledge.ingestion`), deleting a document or a whole KB, and keeping what depends
on those writes in step: the external engine holding a copy of the KB (its mirror, replayed from
the store's journal) and the KB's knowledge graph. :class:`WorkspaceWrites` is one of the parts
of :class:`~rag_lab.knowledge.workspace.Workspace`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.knowledge.write_locks import WriteLocks

if TYPE_CHECKING:
    from rag_lab.knowledge.entities.llm import EntityExtractor
    from rag_lab.knowledge.ingestion import IngestReport
    from rag_lab.models.base import Embedder
    from rag_lab.retrieval.milvus_engine import MilvusEngine

#: the records keep the logger name of :mod:`rag_lab.knowledge.workspace`
log = logging.getLogger("rag_lab.knowledge.workspace")


class WorkspaceWrites(WriteLocks):
    """Ingestion and deletion, with the KB's mirror and graph kept in step."""

    # -- the external engine's copy ---------------------------------------------------------
    def mirror(self, kb: KnowledgeBase, attach: bool = False) -> MilvusEngine | None:
        """The external engine mirroring ``kb`` (see :attr:`mirror_for`), or ``None``. With
        ``attach``, before a write: the store records that the engine holds a copy, so the write
        is journalled until the engine acknowledges it."""
        mirror = self.mirror_for(kb) if self.mirror_for is not None else None
        if mirror is not None and attach:
            mirror.sync.attach(kb)
        return mirror

    def _sync_mirror(self, kb: KnowledgeBase, mirror: MilvusEngine) -> str:
        """Replay ``kb``'s pending writes into its engine copy; "" or the error met (the writes
        stay journalled: the next ingest or search retries them, a search refuses meanwhile)."""
        try:
            with self.kb_lock(kb):
                mirror.sync.replay(kb, self.embedder_for(kb) if self.embedder_for is not None else None)
        except Exception as exc:
            log.warning("%s", exc)
            return str(exc)
        return ""

    def delete_kb(self, id_or_name: str | KnowledgeBase) -> None:
        kb = self.get_kb(id_or_name)
        mirror = self.mirror(kb)
        if mirror is not None:
            mirror.drop_kb(kb)
            mirror.sync.detach(kb)
        with self.kb_lock(kb), self._lock:
            self.store.delete_kb(kb.id)  # with its sync state and journal
            self._vec.pop(kb.id, None)
            self._kw.pop(kb.id, None)
            self._kw_pinned.discard(kb.id)
            shutil.rmtree(self.index_dir(kb.id), ignore_errors=True)
        if kb.metadata.get("graph_enabled"):
            from rag_lab.knowledge.graph import NameSpace

            self.graph.delete_namespace(NameSpace(kb.id))

    # -- ingestion (see rag_lab.knowledge.ingestion) ----------------------------------------
    # ``extractor`` builds the KB's knowledge graph from what changed when the KB has
    # ``graph_enabled`` (default: the offline extractor).
    def ingest_folder(
        self,
        kb: KnowledgeBase | str,
        path: str | Path,
        embedder: Embedder | None,
        progress: bool = True,
        extractor: EntityExtractor | None = None,
        **kw: object,
    ) -> IngestReport:
        from rag_lab.knowledge.ingestion import ingest_folder

        return self._ingest(ingest_folder, kb, path, embedder, progress, extractor, **kw)

    def ingest_documents(
        self,
        kb: KnowledgeBase | str,
        docs: Iterable[object],
        embedder: Embedder | None,
        progress: bool = True,
        extractor: EntityExtractor | None = None,
        **kw: object,
    ) -> IngestReport:
        from rag_lab.knowledge.ingestion import ingest_documents

        return self._ingest(ingest_documents, kb, docs, embedder, progress, extractor, **kw)

    def ingest_faq(
        self,
        kb: KnowledgeBase | str,
        entries: Iterable[object],
        embedder: Embedder | None,
        progress: bool = True,
        extractor: EntityExtractor | None = None,
        **kw: object,
    ) -> IngestReport:
        from rag_lab.knowledge.ingestion import ingest_faq

        return self._ingest(ingest_faq, kb, entries, embedder, progress, extractor, **kw)

    def _ingest(
        self,
        ingest: Callable[..., IngestReport],
        kb: KnowledgeBase | str,
        source: object,
        embedder: Embedder | None,
        progress: bool,
        extractor: EntityExtractor | None,
        **kw: object,
    ) -> IngestReport:
        """One ingestion entry point: the KB mirrored to the engines that hold copies, then
        ``ingest(workspace, kb, source, embedder, ...)``, then the graph (:meth:`_after_ingest`)."""
        kb = self.get_kb(kb)
        self.mirror(kb, attach=True)
        return self._after_ingest(
            kb, ingest(self._as_workspace(), kb, source, embedder, progress=progress, **kw), extractor, progress
        )

    def _after_ingest(
        self, kb: KnowledgeBase, report: IngestReport, extractor: EntityExtractor | None, progress: bool
    ) -> IngestReport:
        mirror = self.mirror(kb)
        if mirror is not None:  # this ingestion's writes, and any left pending by an earlier one
            error = self._sync_mirror(kb, mirror)
            if error:
                report.warnings.append(error)
        if kb.metadata.get("graph_enabled") and report.changed:
            from rag_lab.knowledge.entities import OfflineEntityExtractor, build_graph

            build_graph(
                self,
                kb,
                extractor or OfflineEntityExtractor(),
                knowledge_ids=report.added + report.updated,
                progress=progress,
            )
        return report

    def delete_knowledge(self, kb: KnowledgeBase | str, knowledge_id: str) -> int:
        """Delete one document with its chunks, index entries and graph namespace."""
        from rag_lab.knowledge.ingestion import delete_document

        kb = self.get_kb(kb)
        mirror = self.mirror(kb, attach=True)
        removed = delete_document(self._as_workspace(), kb, knowledge_id)
        if mirror is not None:
            self._sync_mirror(kb, mirror)
        if kb.metadata.get("graph_enabled"):
            from rag_lab.knowledge.graph import NameSpace

            self.graph.delete_namespace(NameSpace(kb.id, knowledge_id))
        return removed
