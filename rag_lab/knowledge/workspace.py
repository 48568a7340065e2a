"""Workspace: one folder holding the knowledge store and the per-KB indexes.

Layout::

    <root>/store.sqlite                    KBs, documents, chunks (KnowledgeStore), unless the
                                           store is a PostgreSQL database shared by several
                                           processes (``Workspace(root, store=URL)``)
    <root>/indexes/<kb_id>/CURRENT         name of the live vector index version
    <root>/indexes/<kb_id>/v…/             vectors.faiss + ids.json (VectorIndex)
    <root>/indexes/<kb_id>/bm25/CURRENT    name of the live keyword index version
    <root>/indexes/<kb_id>/bm25/v…/        bm25s index + tokens (KeywordIndex)
    <root>/locks/<kb_id>.lock              the KB's cross-process write lock
    <root>/vectors.sqlite                  vectors by (model key, text), opened by the Lab
                                           (rag_lab.models.vector_cache)

Writers hold :meth:`Workspace.kb_lock` (a file lock shared by every process on the workspace,
plus a thread lock) and start from the newest saved index; saves switch versions atomically
(:mod:`rag_lab.retrieval.versioned`). SQLite is the source of truth: an index that disagrees
with it when opened is repaired with a warning (:mod:`rag_lab.knowledge.index_repair`).

A KB records the ``model_key`` and ``dimension`` of the embedder it was created with; ingesting
or searching with another embedder raises :class:`MixedEmbeddingSpaces`. KB ids are derived from
the name (``kb_`` + 12 hex digits of its SHA-1), so a KB recreated under the same name keeps its id.

:class:`Workspace` is assembled from one part per responsibility, all sharing the store, the
index caches and their locks: its state and KB lookups (:mod:`rag_lab.knowledge.workspace_base`),
creating and sharing KBs (:mod:`rag_lab.knowledge.kb_registry`), the per-KB index caches
(:mod:`rag_lab.knowledge.index_cache`), the write locks (:mod:`rag_lab.knowledge.write_locks`),
ingestion and deletion (:mod:`rag_lab.knowledge.workspace_writes`). Their public names are
importable from here.
"""

from __future__ import annotations

from rag_lab.knowledge.ingest_common import IngestError as IngestError
from rag_lab.knowledge.ingest_common import check_embedder as check_embedder
from rag_lab.knowledge.kb_registry import KB_TYPES as KB_TYPES
from rag_lab.knowledge.kb_registry import KbRegistry
from rag_lab.knowledge.kb_registry import KnowledgeBaseExists as KnowledgeBaseExists
from rag_lab.knowledge.kb_registry import kb_id_for_name as kb_id_for_name
from rag_lab.knowledge.workspace_writes import WorkspaceWrites
from rag_lab.types.errors import KnowledgeBaseNotFound as KnowledgeBaseNotFound
from rag_lab.types.errors import MixedEmbeddingSpaces as MixedEmbeddingSpaces


class Workspace(KbRegistry, WorkspaceWrites):
    """Store + indexes under ``root``; caches one index object per KB (thread-safe)."""
