"""A KB's write lock: exclusive across threads (one re-entrant lock per workspace) and processes
(a file lock per KB under ``<root>/locks``). A writer starts from the newest saved indexes, keeps
its cached indexes while it writes, and on release marks them checked at the store's state.
:class:`WriteLocks` is one of the parts of :class:`~rag_lab.knowledge.workspace.Workspace`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rag_lab.knowledge.index_cache import IndexCache
from rag_lab.knowledge.models import KnowledgeBase

if TYPE_CHECKING:
    from rag_lab.models.base import Embedder


class WriteLocks(IndexCache):
    """:meth:`kb_lock` (waiting) and :meth:`try_kb_lock` (not waiting)."""

    @contextlib.contextmanager
    def kb_lock(self, kb: KnowledgeBase | str, embedder: Embedder | None = None) -> Iterator[None]:
        """Exclusive write access to one KB across threads and processes (ingestion, deletion).
        On entry the KB's cached indexes are dropped when another process saved newer ones, and
        with ``embedder`` they are repaired against the store, so the writer starts from the truth."""
        kb_id = kb.id if isinstance(kb, KnowledgeBase) else self.get_kb(kb).id
        with self.write_lock, self._file_lock(kb_id):
            self._drop_stale(kb_id)
            if embedder is not None:
                kb_obj = kb if isinstance(kb, KnowledgeBase) else self.get_kb(kb_id)
                vindex = self.vector_index(kb_obj)
                if vindex is not None:
                    from rag_lab.knowledge.index_repair import repair_vector_index

                    repair_vector_index(self._as_workspace(), kb_obj, vindex, embedder)
            with self._written(kb_id):
                yield

    @contextlib.contextmanager
    def try_kb_lock(self, kb: KnowledgeBase) -> Iterator[bool]:
        """:meth:`kb_lock` without waiting: yields True holding it, or False (holding nothing)
        when another writer holds it now."""
        from filelock import Timeout

        if not self.write_lock.acquire(blocking=False):
            yield False
            return
        try:
            lock = self._file_lock(kb.id)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                yield False
                return
            try:
                self._drop_stale(kb.id)
                with self._written(kb.id):
                    yield True
            finally:
                lock.release()
        finally:
            self.write_lock.release()

    @contextlib.contextmanager
    def _written(self, kb_id: str) -> Iterator[None]:
        """While a writer holds ``kb_id``'s lock: its indexes stay cached (the writer keeps them in
        step with its own store writes and saves them); on release, over a shared store, they
        count as checked at the store's state then."""
        with self._lock:
            self._writing[kb_id] = self._writing.get(kb_id, 0) + 1
        try:
            yield
        finally:
            token = self.store.change_token() if self.store.shared else None
            with self._lock:
                self._writing[kb_id] -= 1
                if not self._writing[kb_id]:
                    del self._writing[kb_id]
                if token is not None:
                    self._checked[("vector", kb_id)] = self._checked[("keyword", kb_id)] = token
