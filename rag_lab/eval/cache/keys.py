"""Stage cache keys: canonical JSON, digests, the params and KB settings a search depends on (from
the chunk-search stage contract), code versions (import closures) and the KB content version
(:class:`KbVersioner`)."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

import rag_lab

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.store import KnowledgeStore

__all__ = [
    "CACHE_FORMAT",
    "STAGE_CODE_ROOTS",
    "KbVersioner",
    "array_digest",
    "canonical_json",
    "code_version",
    "code_version_for",
    "key_digest",
    "search_kb_fields",
    "search_param_fields",
    "text_digest",
]

#: the entries' format, part of every row's key: a reader of another format misses
CACHE_FORMAT = 2

#: Modules whose import closure (inside rag_lab) decides each cached stage's output, when the
#: wrapped objects do not say more (:func:`code_version_for` adds the modules of their classes).
STAGE_CODE_ROOTS: dict[str, tuple[str, ...]] = {
    "search": ("rag_lab.retrieval.hybrid_search", "rag_lab.knowledge.workspace"),
    "rerank": ("rag_lab.models.rerank",),
    "embed": ("rag_lab.models.embedding",),
    "bm25": ("rag_lab.retrieval.keyword_index",),
    # with the module of the capturing lab's class (``code_version_for("capture", lab)``): the
    # whole pipeline as that lab wires it
    "capture": ("rag_lab.tuning.capture", "rag_lab.tuning.inputs"),
}


def search_param_fields() -> tuple[str, ...]:
    """The PipelineParams fields a cached search is keyed by: exactly those the chunk-search
    stage's contract declares (:class:`~rag_lab.pipeline.plugins.search.PluginSearch`)."""
    from rag_lab.pipeline.contracts import contract_of
    from rag_lab.pipeline.plugins.search import PluginSearch

    return contract_of(PluginSearch).params


def search_kb_fields() -> tuple[str, ...]:
    """The KnowledgeBase settings a cached search is keyed by (the same contract's ``kb``)."""
    from rag_lab.pipeline.contracts import contract_of
    from rag_lab.pipeline.plugins.search import PluginSearch

    return contract_of(PluginSearch).kb


def _json_default(obj: object) -> object:
    """numpy scalars and arrays as plain JSON values; anything else is an error."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot put a {type(obj).__name__} into a cache key or payload: {obj!r:.80}")


def canonical_json(obj: object) -> str:
    """Deterministic JSON (sorted keys, no spaces, UTF-8 kept) used to hash keys."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def key_digest(key: object) -> str:
    """SHA-256 hex digest of :func:`canonical_json` of ``key``."""
    return hashlib.sha256(canonical_json(key).encode("utf-8")).hexdigest()


def text_digest(text: str) -> str:
    """SHA-256 hex digest of a text (passages in rerank keys)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def array_digest(arr: ArrayLike) -> str:
    """SHA-256 of a vector's float32 little-endian bytes (query embeddings in search keys)."""
    a = np.ascontiguousarray(np.asarray(arr, dtype="<f4").reshape(-1))
    return hashlib.sha256(a.tobytes()).hexdigest()


def _external_source(module: str) -> bytes:
    """Source bytes of a module outside rag_lab (a user's model class), or its name alone."""
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    try:
        return Path(path).read_bytes() if path else module.encode()
    except OSError:
        return module.encode()


@functools.cache
def _version(roots: tuple[str, ...], external: tuple[str, ...]) -> str:
    from rag_lab.importgraph import closure_digest

    h = hashlib.sha256(closure_digest(roots).encode())
    for module in external:
        h.update(b"\x00" + module.encode() + b"\x00" + _external_source(module))
    return f"{rag_lab.__version__}+{h.hexdigest()[:12]}"


@functools.cache
def _package_module_names() -> frozenset[str]:
    """The package's module names, listed once per process (like the import edges
    :func:`_version` hashes). Walking the package for every rerank-cache key made the stage-cache
    sweep slower than no cache (``benchmarks/sweep.py``: 0.6× the full pipeline, 1.7× after)."""
    from rag_lab.importgraph import package_modules

    return frozenset(package_modules())


def code_version_for(stage: str, *objects: object) -> str:
    """``"<rag_lab version>+<12 hex>"``: the hash of the sources of the import closure of the
    stage's :data:`STAGE_CODE_ROOTS` and of the modules defining ``objects``' classes (a class
    defined outside rag_lab contributes its module's source file). Editing any module a cached
    stage runs therefore changes its keys."""
    if stage not in STAGE_CODE_ROOTS:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(sorted(STAGE_CODE_ROOTS))}")
    known = _package_module_names()
    roots: set[str] = set(STAGE_CODE_ROOTS[stage])
    external: set[str] = set()
    for obj in objects:
        if obj is None:
            continue
        module = type(obj).__module__
        (roots if module in known else external).add(module)
    return _version(tuple(sorted(roots)), tuple(sorted(external)))


def code_version(stage: str) -> str:
    """:func:`code_version_for` the stage's own roots."""
    return code_version_for(stage)


# --------------------------------------------------------------------------- KB content version

_SKIP_COLUMNS = frozenset({"created_at", "updated_at"})


class KbVersioner:
    """SHA-256 of a KB's rows (KB settings, documents, chunks; timestamps left out).

    It reads the store file through its own read-only SQLite connection and memoises the versions
    until ``PRAGMA data_version`` changes, which SQLite guarantees whenever any other connection
    (every store connection, any thread or process) commits. So a version is computed once per
    store state, and two workspaces holding the same data get the same version.
    """

    def __init__(self, store_path: str | Path | KnowledgeStore) -> None:
        #: a PostgreSQL knowledge store, read through its own connections and change token
        #: (a SQLite store, or its path, is read through a read-only connection to the file)
        self.store: KnowledgeStore | None = None
        if not isinstance(store_path, (str, Path)):
            if store_path.path is None:
                self.store, store_path = store_path, ""
            else:
                store_path = store_path.path
        self.path = Path(store_path)
        self._conn: sqlite3.Connection | None = None
        self._data_version: int | None = None
        self._memo: dict[str, str] = {}
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        if self.store is not None:
            return self.store._conn()
        if self._conn is None:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30.0)
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def version(self, kb_id: str) -> str:
        with self._lock:
            conn = self._connection()
            if self.store is not None:
                dv = hash(self.store.change_token())
            else:
                dv = int(conn.execute("PRAGMA data_version").fetchone()[0])
            if dv != self._data_version:
                self._memo.clear()
                self._data_version = dv
            cached = self._memo.get(kb_id)
            if cached is not None:
                return cached
            h = hashlib.sha256()
            for table, key_col, order in (
                ("knowledge_bases", "id", "id"),
                ("knowledge", "knowledge_base_id", "id"),
                ("chunks", "knowledge_base_id", "id"),
            ):
                cur = conn.execute(f"SELECT * FROM {table} WHERE {key_col} = ? ORDER BY {order}", (kb_id,))
                names = [d[0] for d in cur.description]
                keep = [i for i, n in enumerate(names) if n not in _SKIP_COLUMNS]
                h.update(f"\x00{table}:{','.join(names[i] for i in keep)}\x00".encode())
                for row in cur:
                    h.update(repr(tuple(row[i] for i in keep)).encode("utf-8"))
                    h.update(b"\x1e")
            version = h.hexdigest()
            self._memo[kb_id] = version
            return version
