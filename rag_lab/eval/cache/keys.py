"""Stage cache keys: canonical JSON, digests, the params a search depends on, code versions and
the KB content version (:class:`KbVersioner`)."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

import rag_lab

CACHE_FORMAT = 1

#: PipelineParams fields HybridSearch reads that change its results (rag_lab/retrieval/hybrid_search.py).
SEARCH_PARAM_FIELDS: tuple[str, ...] = (
    "default_retrieval_top_k",
    "over_recall_factor",
    "over_recall_min",
    "retrieval_pool_max",
    "rrf_k",
    "rrf_vector_weight",
    "rrf_keyword_weight",
    "faq_iteration_start_factor",
    "faq_iteration_max_rounds",
)
#: Fields HybridSearch reads that only bound concurrency / time (a timeout raises, which is never cached).
SEARCH_PARAMS_WITHOUT_EFFECT: tuple[str, ...] = ("store_fanout_concurrency", "store_fanout_timeout_s")

#: Source files (relative to the package) whose code decides each stage's output.
STAGE_SOURCES: dict[str, tuple[str, ...]] = {
    "search": (
        "retrieval/base.py",
        "retrieval/engine.py",
        "retrieval/fusion.py",
        "retrieval/hybrid_search.py",
        "retrieval/keyword_index.py",
        "retrieval/tokenization.py",
        "retrieval/vector_index.py",
        "knowledge/models.py",
        "knowledge/store.py",
        "knowledge/workspace.py",
        "types/search_result.py",
        "types/params.py",
    ),
    "rerank": ("models/rerank.py", "models/embedding.py", "models/base.py"),
    "embed": ("models/embedding.py", "models/base.py"),
    "bm25": ("retrieval/keyword_index.py", "retrieval/tokenization.py"),
}


def _json_default(obj: Any) -> Any:
    """numpy scalars and arrays as plain JSON values; anything else is an error."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot put a {type(obj).__name__} into a cache key or payload: {obj!r:.80}")


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces, UTF-8 kept) used to hash keys."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def key_digest(key: Any) -> str:
    """SHA-256 hex digest of :func:`canonical_json` of ``key``."""
    return hashlib.sha256(canonical_json(key).encode("utf-8")).hexdigest()


def text_digest(text: str) -> str:
    """SHA-256 hex digest of a text (passages in rerank keys)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def array_digest(arr: Any) -> str:
    """SHA-256 of a vector's float32 little-endian bytes (query embeddings in search keys)."""
    a = np.ascontiguousarray(np.asarray(arr, dtype="<f4").reshape(-1))
    return hashlib.sha256(a.tobytes()).hexdigest()


@functools.cache
def code_version(stage: str) -> str:
    """``"<rag_lab version>+<12 hex of the SHA-256 of the stage's source files>"``."""
    if stage not in STAGE_SOURCES:
        raise ValueError(f"unknown stage {stage!r}; known: {', '.join(sorted(STAGE_SOURCES))}")
    root = Path(rag_lab.__file__).resolve().parent
    h = hashlib.sha256()
    for rel in STAGE_SOURCES[stage]:
        path = root / rel
        h.update(rel.encode())
        h.update(path.read_bytes() if path.is_file() else b"<missing>")
    return f"{rag_lab.__version__}+{h.hexdigest()[:12]}"


# --------------------------------------------------------------------------- KB content version

_SKIP_COLUMNS = frozenset({"created_at", "updated_at"})


class KbVersioner:
    """SHA-256 of a KB's rows (KB settings, documents, chunks; timestamps left out).

    It reads the store file through its own read-only SQLite connection and memoises the versions
    until ``PRAGMA data_version`` changes, which SQLite guarantees whenever any other connection
    (every store connection, any thread or process) commits. So a version is computed once per
    store state, and two workspaces holding the same data get the same version.
    """

    def __init__(self, store_path: str | Path) -> None:
        self.path = Path(store_path)
        self._conn: sqlite3.Connection | None = None
        self._data_version: int | None = None
        self._memo: dict[str, str] = {}
        self._lock = threading.Lock()

    def _connection(self) -> sqlite3.Connection:
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
