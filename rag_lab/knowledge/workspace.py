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

Kept whole: one class whose methods share the store, the per-KB index caches and their locks.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.chunking import ChunkingConfig
from rag_lab.knowledge.ingest_common import IngestError as IngestError
from rag_lab.knowledge.ingest_common import check_embedder as check_embedder
from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.knowledge.store import KnowledgeStore
from rag_lab.retrieval.sharing import SHARED_WITH, can_view, check_shared_with
from rag_lab.types.errors import KnowledgeBaseNotFound as KnowledgeBaseNotFound
from rag_lab.types.errors import MixedEmbeddingSpaces as MixedEmbeddingSpaces

if TYPE_CHECKING:
    from rag_lab.knowledge.ingestion import IngestReport
    from rag_lab.models.base import Embedder
    from rag_lab.retrieval.engine import LocalEngine
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.retrieval.vector_index import IndexPolicy, VectorIndex

KB_TYPES = ("document", "faq", "wiki")
log = logging.getLogger(__name__)


class KnowledgeBaseExists(ValueError):
    """``create_kb`` with a name that exists (and ``exist_ok`` not set, or other settings)."""


def kb_id_for_name(name: str) -> str:
    return "kb_" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:12]


class Workspace:
    """Store + indexes under ``root``; caches one index object per KB (thread-safe)."""

    def __init__(self, root: str | Path, store: str | Path | None = None, store_outage_s: float | None = None) -> None:
        """``store``: the knowledge store's file or ``postgresql://`` URL (default
        ``root/store.sqlite``); ``store_outage_s``: how long a PostgreSQL store waits out a
        restarting server (see :class:`~rag_lab.knowledge.store.KnowledgeStore`)."""
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"{self.root}: workspace root exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = KnowledgeStore(self.root / "store.sqlite" if store is None else store, outage_s=store_outage_s)
        #: per (index kind, KB): the store's change token when its cached index was last checked
        #: (a shared store only: other processes write to it without touching this folder)
        self._checked: dict[tuple[str, str], Any] = {}
        #: KBs whose write lock a thread of this process holds now (their cached indexes are the
        #: writer's: never dropped under it)
        self._writing: dict[str, int] = {}
        self._vec: dict[str, VectorIndex] = {}
        self._kw: dict[str, KeywordIndex] = {}
        #: KBs searching with an index put in place by :meth:`use_keyword_index` (not the stored one)
        self._kw_pinned: set[str] = set()
        self._lock = threading.RLock()
        #: serialises writers in this process (see :meth:`kb_lock` for writers in other processes)
        self.write_lock = threading.RLock()
        self._file_locks: dict[str, Any] = {}
        #: ``embedder_for(kb)`` → an embedder of the KB's space, used to re-embed chunks an index
        #: lacks when it is opened (the Lab sets it; None: missing vectors wait for the next ingest)
        self.embedder_for: Callable[[KnowledgeBase], Embedder | None] | None = None
        self._engine: LocalEngine | None = None
        self._graph: Any = None
        #: ``mirror_for(kb)`` → an external engine holding a copy of the KB's chunks (a
        #: :class:`~rag_lab.retrieval.milvus_engine.MilvusEngine`) or ``None``; set by the Lab
        #: from its config. Ingestion and deletion keep that copy in step with SQLite.
        self.mirror_for: Callable[[KnowledgeBase], Any] | None = None

    @property
    def graph(self) -> Any:
        """The knowledge graph of every KB (``root/graph.sqlite``), opened on first use."""
        with self._lock:
            if self._graph is None:
                from rag_lab.knowledge.graph import GraphStore

                self._graph = GraphStore(self.root / "graph.sqlite")
            return self._graph

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def close(self) -> None:
        self.store.close()
        if self._graph is not None:
            self._graph.close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- knowledge bases --------------------------------------------------------------------
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
        bm25: dict[str, Any] | None = None,
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

    def get_kb(self, id_or_name: str | KnowledgeBase, *, tenant_id: int = 0) -> KnowledgeBase:
        """A KB by id or name; unknown → :class:`KnowledgeBaseNotFound` listing the known names
        (with ``tenant_id``: only the KBs that tenant may see, and a KB it may not see is unknown)."""
        if isinstance(id_or_name, KnowledgeBase):
            id_or_name = id_or_name.id
        kb = self.store.get_kb(id_or_name) or self.store.get_kb_by_name(id_or_name)
        if kb is None or not can_view(kb, tenant_id):
            raise KnowledgeBaseNotFound(self._not_found_message([id_or_name], tenant_id))
        return kb

    def _not_found_message(self, wanted: Sequence[str], tenant_id: int = 0) -> str:
        names = [f"{k.name!r} ({k.id})" for k in self.store.list_kbs() if can_view(k, tenant_id)]
        known = ", ".join(names) if names else "none"
        what = ", ".join(repr(w) for w in wanted)
        return f"unknown knowledge base {what} in workspace {str(self.root)!r}; known: {known}"

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

    def list_kbs(self) -> list[KnowledgeBase]:
        return self.store.list_kbs()

    def mirror(self, kb: KnowledgeBase, attach: bool = False) -> Any:
        """The external engine mirroring ``kb`` (see :attr:`mirror_for`), or ``None``. With
        ``attach``, before a write: the store records that the engine holds a copy, so the write
        is journalled until the engine acknowledges it."""
        mirror = self.mirror_for(kb) if self.mirror_for is not None else None
        if mirror is not None and attach:
            mirror.sync.attach(kb)
        return mirror

    def _sync_mirror(self, kb: KnowledgeBase, mirror: Any) -> str:
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

    def chunking_config(self, kb: KnowledgeBase) -> ChunkingConfig:
        return ChunkingConfig(kb.chunk_size, kb.chunk_overlap, int(kb.metadata.get("parent_chunk_size", 0) or 0))

    # -- indexes ----------------------------------------------------------------------------
    def index_dir(self, kb_id: str) -> Path:
        return self.root / "indexes" / kb_id

    def _file_lock(self, kb_id: str) -> Any:
        from filelock import FileLock

        with self._lock:
            lock = self._file_locks.get(kb_id)
            if lock is None:
                (self.root / "locks").mkdir(exist_ok=True)
                lock = self._file_locks[kb_id] = FileLock(str(self.root / "locks" / f"{kb_id}.lock"))
            return lock

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

                    repair_vector_index(self, kb_obj, vindex, embedder)
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

    def _drop_stale(self, kb_id: str, vector: bool = True, keyword: bool = True) -> None:
        """Forget cached indexes (both, or the one asked for) whose on-disk version changed
        (another process saved), and, over a shared store (PostgreSQL), those not checked since
        the store last changed: another replica's writes reach this folder's index files only
        through the repair that runs when they are opened again (:mod:`.index_repair`)."""
        from rag_lab.retrieval.versioned import read_pointer

        if self.store.shared and kb_id not in self._writing:
            token = self.store.change_token()
            with self._lock:
                for kind, cache, wanted in (("vector", self._vec, vector), ("keyword", self._kw, keyword)):
                    if wanted and self._checked.get((kind, kb_id)) != token:
                        if kind == "vector" or kb_id not in self._kw_pinned:
                            cache.pop(kb_id, None)  # type: ignore[attr-defined]
                        self._checked[(kind, kb_id)] = token
        with self._lock:
            vec = self._vec.get(kb_id) if vector else None
            if vec is not None and vec.version != read_pointer(self.index_dir(kb_id)):
                del self._vec[kb_id]
            kw = self._kw.get(kb_id) if keyword and kb_id not in self._kw_pinned else None
            if kw is not None and kw.version != read_pointer(self.index_dir(kb_id) / "bm25"):
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

    def _repair_when_free(self, kb: KnowledgeBase, repair: Callable[[], Any]) -> None:
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
        self._repair_when_free(kb, lambda: repair_vector_index(self, kb, idx, embedder))
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

        self._repair_when_free(kb, lambda: repair_keyword_index(self, kb, idx))
        return idx

    def engine(self) -> LocalEngine:
        """The in-process retrieval engine over this workspace."""
        with self._lock:
            if self._engine is None:
                from rag_lab.retrieval.engine import LocalEngine

                self._engine = LocalEngine(self)
            return self._engine

    # -- ingestion (see rag_lab.knowledge.ingestion) ----------------------------------------
    # ``extractor`` builds the KB's knowledge graph from what changed when the KB has
    # ``graph_enabled`` (default: the offline extractor).
    def ingest_folder(
        self,
        kb: KnowledgeBase | str,
        path: str | Path,
        embedder: Embedder | None,
        progress: bool = True,
        extractor: Any = None,
        **kw: Any,
    ) -> IngestReport:
        from rag_lab.knowledge.ingestion import ingest_folder

        kb = self.get_kb(kb)
        self.mirror(kb, attach=True)
        return self._after_ingest(
            kb, ingest_folder(self, kb, path, embedder, progress=progress, **kw), extractor, progress
        )

    def ingest_documents(
        self,
        kb: KnowledgeBase | str,
        docs: Iterable[Any],
        embedder: Embedder | None,
        progress: bool = True,
        extractor: Any = None,
        **kw: Any,
    ) -> IngestReport:
        from rag_lab.knowledge.ingestion import ingest_documents

        kb = self.get_kb(kb)
        self.mirror(kb, attach=True)
        return self._after_ingest(
            kb, ingest_documents(self, kb, docs, embedder, progress=progress, **kw), extractor, progress
        )

    def ingest_faq(
        self,
        kb: KnowledgeBase | str,
        entries: Iterable[Any],
        embedder: Embedder | None,
        progress: bool = True,
        extractor: Any = None,
        **kw: Any,
    ) -> IngestReport:
        from rag_lab.knowledge.ingestion import ingest_faq

        kb = self.get_kb(kb)
        self.mirror(kb, attach=True)
        return self._after_ingest(
            kb, ingest_faq(self, kb, entries, embedder, progress=progress, **kw), extractor, progress
        )

    def _after_ingest(self, kb: KnowledgeBase, report: IngestReport, extractor: Any, progress: bool) -> IngestReport:
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
        removed = delete_document(self, kb, knowledge_id)
        if mirror is not None:
            self._sync_mirror(kb, mirror)
        if kb.metadata.get("graph_enabled"):
            from rag_lab.knowledge.graph import NameSpace

            self.graph.delete_namespace(NameSpace(kb.id, knowledge_id))
        return removed
