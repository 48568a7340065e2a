"""The per-KB indexes of a workspace, cached one object per KB: the vector index (FAISS), the
keyword index (bm25s), the in-process engine over them. A cached index is dropped when another
process saved a newer version or, over a shared store, when the store changed since it was last
checked; a loaded index is checked against the store and repaired when no writer holds the KB
(:mod:`rag_lab.knowledge.index_repair`). :class:`IndexCache` is one of the parts of
:class:`~rag_lab.knowledge.workspace.Workspace`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.knowledge.workspace_base import WorkspaceBase
from rag_lab.retrieval.versioned import read_pointer

if TYPE_CHECKING:
    from rag_lab.retrieval.engine import LocalEngine
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.retrieval.vector_index import IndexPolicy, VectorIndex

#: the records keep the logger name of :mod:`rag_lab.knowledge.workspace`
log = logging.getLogger("rag_lab.knowledge.workspace")


class IndexCache(WorkspaceBase):
    """Loading, caching, pinning and dropping a workspace's per-KB indexes."""

    def _drop_stale(self, kb_id: str, vector: bool = True, keyword: bool = True) -> None:
        """Forget cached indexes (both, or the one asked for) whose on-disk version changed
        (another process saved), and, over a shared store (PostgreSQL), those not checked since
        the store last changed: another replica's writes reach this folder's index files only
        through the repair that runs when they are opened again (:mod:`.index_repair`)."""
        if self.store.shared and kb_id not in self._writing:
            token = self.store.change_token()
            with self._lock:
                for kind, cache, wanted in (("vector", self._vec, vector), ("keyword", self._kw, keyword)):
                    if wanted and self._checked.get((kind, kb_id)) != token:
                        if kind == "vector" or kb_id not in self._kw_pinned:
                            cache.pop(kb_id, None)
                        self._checked[(kind, kb_id)] = token
        with self._lock:
            roots = self._index_roots.get(kb_id)
            if roots is None:
                d = self.index_dir(kb_id)
                roots = self._index_roots[kb_id] = (str(d), str(d / "bm25"))
            vec = self._vec.get(kb_id) if vector else None
            if vec is not None and vec.version != read_pointer(roots[0]):
                del self._vec[kb_id]
            kw = self._kw.get(kb_id) if keyword and kb_id not in self._kw_pinned else None
            if kw is not None and kw.version != read_pointer(roots[1]):
                del self._kw[kb_id]

    def use_keyword_index(self, kb: KnowledgeBase | str, index: KeywordIndex | None) -> None:
        """Search ``kb`` with ``index`` in this process (a sweep's BM25 settings) instead of its
        stored keyword index, until called again with ``None`` (the stored one is loaded again).
        The stored index and the KB's settings are not changed; writes to the KB meanwhile go to
        ``index``."""
        kb_id = kb.id if isinstance(kb, KnowledgeBase) else self.get_kb(kb).id
        with self._lock:
            if index is None:
                self._kw_pinned.discard(kb_id)
                self._kw.pop(kb_id, None)
            else:
                self._kw[kb_id] = index
                self._kw_pinned.add(kb_id)

    def _repair_when_free(self, kb: KnowledgeBase, repair: Callable[[], object]) -> None:
        """Run ``repair`` under the KB's lock if no writer holds it now (a writer in progress is
        expected to disagree with the store until it saves; it leaves a consistent state)."""
        from filelock import Timeout

        lock = self._file_lock(kb.id)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.debug("knowledge base %r: a writer holds the lock; index check skipped", kb.name)
            return
        try:
            repair()
        finally:
            lock.release()

    def vector_index(self, kb: KnowledgeBase | str) -> VectorIndex | None:
        """The KB's vector index (loaded once, reloaded when another process saved a newer
        version; checked against the store when loaded), or ``None`` for a KB without embeddings."""
        kb = kb if isinstance(kb, KnowledgeBase) else self.get_kb(kb)
        if not kb.embedding_model_key or kb.embedding_dim <= 0:
            return None
        self._drop_stale(kb.id, keyword=False)
        with self._lock:
            idx = self._vec.get(kb.id)
            if idx is not None:
                return idx
            from rag_lab.retrieval.vector_index import VectorIndex, VectorIndexError

            try:
                idx = VectorIndex.load(self.index_dir(kb.id), kb.embedding_dim)
            except VectorIndexError as exc:
                log.warning("knowledge base %r: %s; rebuilding the vector index from the store", kb.name, exc)
                idx = VectorIndex(kb.embedding_dim, self.index_dir(kb.id))
            self._vec[kb.id] = idx
        from rag_lab.knowledge.index_repair import repair_vector_index

        embedder = self.embedder_for(kb) if self.embedder_for is not None else None
        self._repair_when_free(kb, lambda: repair_vector_index(self._as_workspace(), kb, idx, embedder))
        return idx

    def vector_index_policy(self, kb: KnowledgeBase | str) -> IndexPolicy | None:
        """The policy answering the KB's vector queries (flat / 8-bit pre-scan / HNSW and their
        settings) without loading the index: the loaded index's, else the one a load gives it
        (``VectorIndex.default_policy``); ``None`` for a KB without embeddings."""
        kb = kb if isinstance(kb, KnowledgeBase) else self.get_kb(kb)
        if not kb.embedding_model_key or kb.embedding_dim <= 0:
            return None
        from rag_lab.retrieval.vector_index import VectorIndex

        with self._lock:
            idx = self._vec.get(kb.id)
        return idx.policy if idx is not None else VectorIndex.default_policy

    def keyword_index(self, kb: KnowledgeBase | str) -> KeywordIndex:
        """The KB's keyword index (loaded once, reloaded when another process saved a newer
        version; rebuilt from the stored chunks if it was built with another tokenizer, cannot be
        read, or disagrees with the store)."""
        kb = kb if isinstance(kb, KnowledgeBase) else self.get_kb(kb)
        self._drop_stale(kb.id, vector=False)
        with self._lock:
            idx = self._kw.get(kb.id)
            if idx is not None:
                return idx
            from rag_lab.retrieval.keyword_index import KeywordIndex, KeywordIndexError, StaleKeywordIndex

            path = self.index_dir(kb.id) / "bm25"
            settings = dict(kb.metadata.get("bm25") or {})
            try:
                idx = KeywordIndex.load(path, **settings)
            except StaleKeywordIndex:
                idx = KeywordIndex(path, **settings)
            except KeywordIndexError as exc:
                log.warning("knowledge base %r: %s; rebuilding the keyword index from the store", kb.name, exc)
                idx = KeywordIndex(path, **settings)
            self._kw[kb.id] = idx
        from rag_lab.knowledge.index_repair import repair_keyword_index

        self._repair_when_free(kb, lambda: repair_keyword_index(self._as_workspace(), kb, idx))
        return idx

    def engine(self) -> LocalEngine:
        """The in-process retrieval engine over this workspace."""
        with self._lock:
            if self._engine is None:
                from rag_lab.retrieval.engine import LocalEngine

                self._engine = LocalEngine(self._as_workspace())
            return self._engine
