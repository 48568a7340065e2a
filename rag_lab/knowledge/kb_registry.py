"""Creating and sharing knowledge bases. A KB's id is derived from its name (``kb_`` + 12 hex
digits of its SHA-1), so a KB recreated under the same name keeps its id; it records the
``model_key`` and ``dimension`` of the embedder it was created with. :class:`KbRegistry` is one
of the parts of :class:`~rag_lab.knowledge.workspace.Workspace`.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.knowledge.chunking import ChunkingConfig
from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.knowledge.workspace_base import WorkspaceBase
from rag_lab.retrieval.sharing import SHARED_WITH, check_shared_with

if TYPE_CHECKING:
    from rag_lab.models.base import Embedder

KB_TYPES = ("document", "faq", "wiki")


class KnowledgeBaseExists(ValueError):
    """``create_kb`` with a name that exists (and ``exist_ok`` not set, or other settings)."""


def kb_id_for_name(name: str) -> str:
    return "kb_" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:12]


class KbRegistry(WorkspaceBase):
    """New KBs (one creator at a time across processes) and who may search them."""

    def create_kb(
        self,
        name: str,
        embedder: Embedder | None,
        chunk_size: int = 512,
        chunk_overlap: int = 64,
        parent_chunk_size: int = 0,
        kb_type: str = "document",
        *,
        exist_ok: bool = False,
        description: str = "",
        keyword_enabled: bool = True,
        bm25: dict[str, object] | None = None,
        graph_enabled: bool = False,
        tenant_id: int = 1,
    ) -> KnowledgeBase:
        """Create a KB bound to ``embedder``'s space (``None``: keyword-only). ``bm25`` may set
        ``k1``, ``b`` and ``method`` for its keyword index. ``tenant_id`` owns the KB: on the
        server only that tenant (and tenants in ``metadata["shared_with"]``) can search it; its
        chunks carry no tenant of their own, they belong to the KB's (docs/security.md)."""
        if isinstance(tenant_id, bool) or not isinstance(tenant_id, int) or tenant_id < 1:
            raise ValueError(f"tenant_id={tenant_id!r} must be an integer >= 1")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"knowledge base name={name!r} must be a non-empty string")
        if kb_type not in KB_TYPES:
            raise ValueError(f"kb_type={kb_type!r} is not one of {KB_TYPES}")
        ChunkingConfig(chunk_size, chunk_overlap, parent_chunk_size).validate()
        bm25_cfg = dict(bm25 or {})
        unknown = set(bm25_cfg) - {"k1", "b", "method"}
        if unknown:
            raise ValueError(f"bm25 settings {sorted(unknown)} are unknown (allowed: k1, b, method)")
        kb = KnowledgeBase(
            id=kb_id_for_name(name),
            name=name,
            description=description,
            type=kb_type,
            tenant_id=tenant_id,
            embedding_model_key=embedder.model_key if embedder is not None else "",
            embedding_dim=int(embedder.dimension) if embedder is not None else 0,
            vector_enabled=embedder is not None,
            keyword_enabled=keyword_enabled,
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            metadata={"parent_chunk_size": parent_chunk_size, "bm25": bm25_cfg, "graph_enabled": bool(graph_enabled)},
        )
        if embedder is not None and not embedder.model_key:
            raise ValueError("the embedder's model_key is empty; it must name the embedding space")
        with self._lock, self._file_lock("_kbs"):  # one creator at a time, across processes
            existing = self.store.get_kb_by_name(name)
            if existing is not None:
                if not exist_ok:
                    raise KnowledgeBaseExists(f"knowledge base {name!r} already exists (id {existing.id})")
                diffs = [
                    f"{f}: existing {getattr(existing, f)!r}, requested {getattr(kb, f)!r}"
                    for f in (
                        "type",
                        "tenant_id",
                        "embedding_model_key",
                        "embedding_dim",
                        "chunk_size",
                        "chunk_overlap",
                    )
                    if getattr(existing, f) != getattr(kb, f)
                ]
                if existing.metadata.get("parent_chunk_size", 0) != parent_chunk_size:
                    diffs.append(
                        f"parent_chunk_size: existing {existing.metadata.get('parent_chunk_size', 0)!r}, "
                        f"requested {parent_chunk_size!r}"
                    )
                if diffs:
                    raise KnowledgeBaseExists(
                        f"knowledge base {name!r} exists with other settings ({'; '.join(diffs)})"
                    )
                return existing
            # a fresh KB never inherits index files left by a deleted namesake
            shutil.rmtree(self.index_dir(kb.id), ignore_errors=True)
            self._vec.pop(kb.id, None)
            self._kw.pop(kb.id, None)
            self._kw_pinned.discard(kb.id)
            return self.store.create_kb(kb)

    def share_kb(self, id_or_name: str | KnowledgeBase, tenant_ids: Sequence[int]) -> KnowledgeBase:
        """Open a KB to other tenants (replaces ``metadata["shared_with"]``; ``[]`` shares with
        nobody). ``tenant_ids`` must be a list of positive integers (:class:`ValueError` otherwise,
        ``None`` included: unsharing is ``[]``)."""
        if tenant_ids is None or isinstance(tenant_ids, (str, bytes)):
            raise ValueError(
                f"tenant_ids (metadata.shared_with): expected a list of tenant ids (positive integers, [] to "
                f"share with nobody), "
                f"got {tenant_ids!r:.40}"
            )
        kb = self.get_kb(id_or_name)
        tenants = check_shared_with(tenant_ids)
        with self._lock, self._file_lock("_kbs"):
            kb = self.get_kb(kb.id)
            kb.metadata[SHARED_WITH] = tenants
            self.store.update_kb(kb)
        return kb
