"""The state of a :class:`~rag_lab.knowledge.workspace.Workspace`: its folder, the knowledge
store, the per-KB index caches and locks, the knowledge graph; reading KBs by id or name (an
unknown one's error lists the known names a tenant may see) and the per-KB file locks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Self, cast

from rag_lab.knowledge.chunking import ChunkingConfig
from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.knowledge.store import KnowledgeStore
from rag_lab.retrieval.sharing import can_view
from rag_lab.types.errors import KnowledgeBaseNotFound

if TYPE_CHECKING:
    from filelock import FileLock

    from rag_lab.knowledge.graph import GraphStore
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder
    from rag_lab.retrieval.engine import LocalEngine
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.retrieval.milvus_engine import MilvusEngine
    from rag_lab.retrieval.vector_index import VectorIndex


class WorkspaceBase:
    """Store + index caches under ``root`` (thread-safe), and the KBs as the store holds them."""

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
        self._checked: dict[tuple[str, str], object] = {}
        #: KBs whose write lock a thread of this process holds now (their cached indexes are the
        #: writer's: never dropped under it)
        self._writing: dict[str, int] = {}
        self._vec: dict[str, VectorIndex] = {}
        #: per KB: its vector and keyword index folders as strings (checked on every search)
        self._index_roots: dict[str, tuple[str, str]] = {}
        self._kw: dict[str, KeywordIndex] = {}
        #: KBs searching with an index put in place by :meth:`use_keyword_index` (not the stored one)
        self._kw_pinned: set[str] = set()
        self._lock = threading.RLock()
        #: serialises writers in this process (see :meth:`kb_lock` for writers in other processes)
        self.write_lock = threading.RLock()
        self._file_locks: dict[str, FileLock] = {}
        #: ``embedder_for(kb)`` → an embedder of the KB's space, used to re-embed chunks an index
        #: lacks when it is opened (the Lab sets it; None: missing vectors wait for the next ingest)
        self.embedder_for: Callable[[KnowledgeBase], Embedder | None] | None = None
        self._engine: LocalEngine | None = None
        self._graph: GraphStore | None = None
        #: ``mirror_for(kb)`` → an external engine holding a copy of the KB's chunks (a
        #: :class:`~rag_lab.retrieval.milvus_engine.MilvusEngine`) or ``None``; set by the Lab
        #: from its config. Ingestion and deletion keep that copy in step with SQLite.
        self.mirror_for: Callable[[KnowledgeBase], MilvusEngine | None] | None = None

    @property
    def graph(self) -> GraphStore:
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _as_workspace(self) -> Workspace:
        """This object as the :class:`~rag_lab.knowledge.workspace.Workspace` it is a part of
        (for the functions over a workspace: ingestion, index repair, the engine)."""
        return cast("Workspace", self)

    # -- reading knowledge bases ------------------------------------------------------------
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

    def list_kbs(self) -> list[KnowledgeBase]:
        return self.store.list_kbs()

    def chunking_config(self, kb: KnowledgeBase) -> ChunkingConfig:
        return ChunkingConfig(kb.chunk_size, kb.chunk_overlap, int(kb.metadata.get("parent_chunk_size", 0) or 0))

    # -- index folders and file locks -------------------------------------------------------
    def index_dir(self, kb_id: str) -> Path:
        return self.root / "indexes" / kb_id

    def _file_lock(self, kb_id: str) -> FileLock:
        from filelock import FileLock

        with self._lock:
            lock = self._file_locks.get(kb_id)
            if lock is None:
                (self.root / "locks").mkdir(exist_ok=True)
                lock = self._file_locks[kb_id] = FileLock(str(self.root / "locks" / f"{kb_id}.lock"))
            return lock
