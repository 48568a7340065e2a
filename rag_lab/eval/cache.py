"""Content-addressed stage cache: search results, rerank-model scores and query embeddings on disk.

A sweep over post-retrieval params (rerank threshold, MMR λ, composite weights, top-K, merge
overlap, …) asks the same questions again and again; only the stages after retrieval see other
inputs. :func:`enable_stage_cache` wraps three services of a :class:`~rag_lab.lab.lab.Lab` without
touching any pipeline plugin:

* ``lab.services.searcher`` → :class:`CachingSearcher`, keyed by the primary KB, every
  :class:`~rag_lab.retrieval.base.SearchParams` field (the query embedding by the SHA-256 of its
  float32 bytes), the :class:`~rag_lab.types.params.PipelineParams` fields HybridSearch reads
  (:data:`SEARCH_PARAM_FIELDS`), each searched KB's settings, embedding model key, BM25 settings
  (tokenizer identity, k1, b, method, dtype) and content version (:class:`KbVersioner`), and the
  code version of the retrieval sources;
* each rerank model → :class:`CachingReranker`, keyed by model id, query and the SHA-256 of every
  passage, in order;
* ``lab.services.embedder_for`` → embedders wrapped in :class:`CachingEmbedder` (query
  embeddings), keyed by the embedding model key and the text.

Every key also holds ``rag_lab.__version__`` and a hash of the source files of that stage
(:func:`code_version`), so editing the retrieval code invalidates cached searches.

On disk: ``<root>/<stage>/<key[:2]>/<key>.json`` holding ``{"format", "stage", "key", "payload"}``
(plain JSON, no pickle). The file name is the SHA-256 of the canonical JSON of the key; a read
checks the stored key equals the asked one. Writes go to a temporary file in the same folder and
are renamed into place (``os.replace``), so concurrent processes and threads never see a partial
entry and the last writer of identical content wins. Unreadable entries count as misses (and as
``errors``) and are rewritten. Hit / miss / write / error counters are kept per stage.

The BM25 index cache (:class:`Bm25IndexCache`) keeps built keyword indexes keyed by tokenizer
identity, k1, b, method, dtype and the hash of the indexed texts, so a sweep over BM25 settings
builds each index once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import rag_lab

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.lab.lab import Lab
    from rag_lab.models.base import RerankScore
    from rag_lab.retrieval.base import SearchParams
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.types.search_result import SearchResult

__all__ = [
    "Bm25IndexCache",
    "CacheStats",
    "CachingEmbedder",
    "CachingReranker",
    "CachingSearcher",
    "KbVersioner",
    "SEARCH_PARAM_FIELDS",
    "SEARCH_PARAMS_WITHOUT_EFFECT",
    "StageCache",
    "StageCacheHandle",
    "canonical_json",
    "code_version",
    "enable_stage_cache",
    "key_digest",
]

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


# --------------------------------------------------------------------------- keys


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


# --------------------------------------------------------------------------- the store


@dataclass
class CacheStats:
    """Counters of one stage."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    errors: int = 0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else float("nan")


class StageCache:
    """Content-addressed JSON entries under ``root`` (see the module docstring).

    ``memory_entries`` > 0 keeps that many recently used entries' JSON text in memory as well
    (a read still parses the text, so callers always get fresh objects they may mutate).
    """

    def __init__(self, root: str | Path, memory_entries: int = 4096) -> None:
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"stage cache {self.root}: exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)
        self.memory_entries = max(0, int(memory_entries))
        self._memory: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._stats: dict[str, CacheStats] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StageCache({str(self.root)!r})"

    # -- paths and counters -----------------------------------------------------------------
    def path_for(self, stage: str, digest: str) -> Path:
        return self.root / stage / digest[:2] / f"{digest}.json"

    def _count(self, stage: str, what: str) -> None:
        with self._lock:
            st = self._stats.setdefault(stage, CacheStats())
            setattr(st, what, getattr(st, what) + 1)

    def stats(self) -> dict[str, CacheStats]:
        """A copy of the per-stage counters."""
        with self._lock:
            return {k: dataclasses.replace(v) for k, v in sorted(self._stats.items())}

    def reset_stats(self) -> None:
        with self._lock:
            self._stats.clear()

    # -- read / write -----------------------------------------------------------------------
    def _remember(self, mkey: tuple[str, str], text: str) -> None:
        if not self.memory_entries:
            return
        with self._lock:
            self._memory[mkey] = text
            self._memory.move_to_end(mkey)
            while len(self._memory) > self.memory_entries:
                self._memory.popitem(last=False)

    def get(self, stage: str, key: Any) -> Any | None:
        """The payload stored for ``key`` (a fresh object), or ``None`` on a miss."""
        key_text = canonical_json(key)
        digest = hashlib.sha256(key_text.encode("utf-8")).hexdigest()
        mkey = (stage, digest)
        with self._lock:
            text = self._memory.get(mkey)
            if text is not None:
                self._memory.move_to_end(mkey)
        if text is None:
            path = self.path_for(stage, digest)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                self._count(stage, "misses")
                return None
            except OSError:
                self._count(stage, "errors")
                self._count(stage, "misses")
                return None
        try:
            entry = json.loads(text)
            ok = (
                isinstance(entry, dict)
                and entry.get("format") == CACHE_FORMAT
                and entry.get("stage") == stage
                and canonical_json(entry.get("key")) == key_text
                and "payload" in entry
            )
        except ValueError:
            ok = False
        if not ok:
            self._count(stage, "errors")
            self._count(stage, "misses")
            return None
        self._remember(mkey, text)
        self._count(stage, "hits")
        return entry["payload"]

    def put(self, stage: str, key: Any, payload: Any) -> Path:
        """Store ``payload`` (JSON-serialisable) under ``key``; atomic, last writer wins."""
        key_text = canonical_json(key)
        digest = hashlib.sha256(key_text.encode("utf-8")).hexdigest()
        text = json.dumps(
            {"format": CACHE_FORMAT, "stage": stage, "key": json.loads(key_text), "payload": payload},
            ensure_ascii=False,
            separators=(",", ":"),
            default=_json_default,
        )
        path = self.path_for(stage, digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._remember((stage, digest), text)
        self._count(stage, "writes")
        return path

    def entries(self, stage: str | None = None) -> int:
        """Number of entries on disk (for one stage, or all)."""
        base = self.root / stage if stage else self.root
        return sum(1 for p in base.rglob("*.json") if not p.name.startswith(".tmp-")) if base.is_dir() else 0

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()


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


# --------------------------------------------------------------------------- search


def _search_result_payload(r: SearchResult) -> dict[str, Any]:
    """Every field of a SearchResult (internal ones too), JSON-ready."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(r):
        v = getattr(r, f.name)
        if f.name == "match_type":
            v = int(v)
        out[f.name] = v
    return out


def _search_result_from_payload(d: Mapping[str, Any]) -> SearchResult:
    from rag_lab.types.search_result import SearchResult

    return SearchResult(**d)


class CachingSearcher:
    """A HybridSearcher wrapper that serves repeated searches from a :class:`StageCache`.

    Anything but ``search`` / ``with_params`` is delegated to the wrapped searcher (so
    ``search_with_trace`` always runs the real search). KBs that cannot be resolved are not
    cached: the wrapped search runs and raises its own error.
    """

    stage = "search"

    def __init__(self, inner: Any, cache: StageCache, versioner: KbVersioner) -> None:
        self.inner = inner
        self.cache = cache
        self.versioner = versioner

    def __repr__(self) -> str:
        return f"CachingSearcher({self.inner!r}, {self.cache!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def with_params(self, params: Any) -> CachingSearcher:
        other = self.inner.with_params(params)
        return self if other is self.inner else CachingSearcher(other, self.cache, self.versioner)

    def _kb_entry(self, ws: Workspace, kb: KnowledgeBase) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": kb.id,
            "type": kb.type,
            "embedding_model_key": kb.embedding_model_key,
            "embedding_dim": kb.embedding_dim,
            "vector_enabled": kb.vector_enabled,
            "keyword_enabled": kb.keyword_enabled,
            "content_version": self.versioner.version(kb.id),
        }
        if kb.keyword_enabled:
            entry["bm25"] = ws.keyword_index(kb).params  # tokenizer identity, k1, b, method, dtype
        return entry

    def search_key(self, primary_kb_id: str, sp: SearchParams) -> dict[str, Any] | None:
        """The cache key of a search, or ``None`` when a KB cannot be resolved."""
        ws = self.inner.workspace
        store = ws.store
        refs = list(dict.fromkeys(i for i in (list(sp.knowledge_base_ids) or [primary_kb_id]) if i))
        if primary_kb_id not in refs:
            refs.append(primary_kb_id)
        kbs = []
        for ref in refs:
            kb = store.get_kb(ref) or store.get_kb_by_name(ref)
            if kb is None:
                return None
            kbs.append(kb)
        sp_fields: dict[str, Any] = {}
        for f in dataclasses.fields(sp):
            v = getattr(sp, f.name)
            if f.name == "query_embedding":
                v = None if v is None else array_digest(v)
            sp_fields[f.name] = v
        params = self.inner.params
        return {
            "stage": self.stage,
            "code": code_version(self.stage),
            "primary": primary_kb_id,
            "search_params": sp_fields,
            "params": {name: getattr(params, name) for name in SEARCH_PARAM_FIELDS},
            "kbs": {ref: self._kb_entry(ws, kb) for ref, kb in zip(refs, kbs)},
        }

    async def search(self, primary_kb_id: str, sp: SearchParams) -> list[SearchResult]:
        key = await asyncio.to_thread(self.search_key, primary_kb_id, sp)
        if key is None:
            return await self.inner.search(primary_kb_id, sp)
        payload = self.cache.get(self.stage, key)
        if payload is not None:
            return [_search_result_from_payload(d) for d in payload]
        results = await self.inner.search(primary_kb_id, sp)
        self.cache.put(self.stage, key, [_search_result_payload(r) for r in results])
        return results


# --------------------------------------------------------------------------- rerank


class CachingReranker:
    """A Reranker wrapper keyed by (model id, query, passage hashes); errors are not cached."""

    stage = "rerank"

    def __init__(self, inner: Any, cache: StageCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = str(getattr(inner, "model_id", "") or type(inner).__name__)

    def __repr__(self) -> str:
        return f"CachingReranker({self.inner!r}, {self.cache!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def rerank_key(self, query: str, passages: Sequence[str]) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "code": code_version(self.stage),
            "model_id": self.model_id,
            "query": query,
            "passages": [text_digest(p) for p in passages],
        }

    async def rerank(self, query: str, passages: Sequence[str]) -> list[RerankScore]:
        from rag_lab.models.base import RerankScore

        if not isinstance(query, str) or not all(isinstance(p, str) for p in passages):
            return await self.inner.rerank(query, passages)  # the model reports the bad input
        key = self.rerank_key(query, passages)
        payload = self.cache.get(self.stage, key)
        if payload is not None:
            return [RerankScore(index=int(i), relevance_score=float(s)) for i, s in payload]
        scores = await self.inner.rerank(query, passages)
        self.cache.put(self.stage, key, [[int(s.index), float(s.relevance_score)] for s in scores])
        return scores


# --------------------------------------------------------------------------- embeddings


class CachingEmbedder:
    """An Embedder wrapper caching each text's vector (float32, bit-exact) by model key + text."""

    stage = "embed"

    def __init__(self, inner: Any, cache: StageCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_key = inner.model_key

    def __repr__(self) -> str:
        return f"CachingEmbedder({self.inner!r}, {self.cache!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_key(self, text: str) -> dict[str, Any]:
        return {"stage": self.stage, "code": code_version(self.stage), "model_key": self.model_key, "text": text}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = list(texts)
        if any(not isinstance(t, str) for t in items):
            return self.inner.embed(texts)  # the model reports the bad input
        rows: list[np.ndarray | None] = []
        todo: list[int] = []
        for i, t in enumerate(items):
            payload = self.cache.get(self.stage, self.embed_key(t))
            if payload is None:
                rows.append(None)
                todo.append(i)
            else:
                rows.append(np.asarray(payload, dtype=np.float32))
        if todo:
            fresh = np.asarray(self.inner.embed([items[i] for i in todo]), dtype=np.float32)
            for j, i in enumerate(todo):
                rows[i] = fresh[j]
                self.cache.put(self.stage, self.embed_key(items[i]), [float(x) for x in fresh[j]])
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([r for r in rows if r is not None]).astype(np.float32, copy=False)


# --------------------------------------------------------------------------- BM25 indexes


class Bm25IndexCache:
    """Built BM25 keyword indexes keyed by tokenizer identity, k1, b, method, dtype and texts.

    ``get(chunk_ids, texts, k1=, b=, method=)`` returns a loaded
    :class:`~rag_lab.retrieval.keyword_index.KeywordIndex`; the first call for a key builds and
    saves it under ``<cache root>/bm25/<key>/``, later calls (any process) load it.
    """

    stage = "bm25"

    def __init__(self, cache: StageCache) -> None:
        self.cache = cache
        self._lock = threading.Lock()

    def index_key(
        self,
        chunk_ids: Sequence[str],
        texts: Sequence[str],
        *,
        k1: float,
        b: float,
        method: str,
        dtype: str = "float64",
        tokenizer: Any = None,
    ) -> dict[str, Any]:
        from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER

        tok = tokenizer or DEFAULT_TOKENIZER
        h = hashlib.sha256()
        for cid, text in sorted(zip(chunk_ids, texts)):
            h.update(cid.encode("utf-8") + b"\x1f" + text.encode("utf-8") + b"\x1e")
        return {
            "stage": self.stage,
            "code": code_version(self.stage),
            "tokenizer": tok.identity,
            "k1": float(k1),
            "b": float(b),
            "method": method,
            "dtype": dtype,
            "corpus": h.hexdigest(),
        }

    def get(
        self,
        chunk_ids: Sequence[str],
        texts: Sequence[str],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "robertson",
        dtype: str = "float64",
        tokenizer: Any = None,
    ) -> KeywordIndex:
        from rag_lab.retrieval.keyword_index import KeywordIndex
        from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER

        if len(chunk_ids) != len(texts):
            raise ValueError(f"Bm25IndexCache.get: {len(chunk_ids)} chunk ids for {len(texts)} texts")
        tok = tokenizer or DEFAULT_TOKENIZER
        key = self.index_key(chunk_ids, texts, k1=k1, b=b, method=method, dtype=dtype, tokenizer=tok)
        digest = key_digest(key)
        folder = self.cache.root / self.stage / digest
        settings = dict(k1=k1, b=b, method=method, dtype=dtype, tokenizer=tok)
        with self._lock:
            if (folder / KeywordIndex.META_FILE).is_file():
                try:
                    idx = KeywordIndex.load(folder, **settings)
                    self.cache._count(self.stage, "hits")
                    return idx
                except Exception:
                    self.cache._count(self.stage, "errors")
            self.cache._count(self.stage, "misses")
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.cache.root))
            try:
                idx = KeywordIndex(tmp / "index", **settings)
                idx.add(list(chunk_ids), list(texts))
                idx.save()
                folder.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.replace(tmp / "index", folder)
                except OSError:  # another process won the race with the same content
                    pass
            finally:
                import shutil

                shutil.rmtree(tmp, ignore_errors=True)
            self.cache._count(self.stage, "writes")
            return KeywordIndex.load(folder, **settings)

    def for_kb(
        self,
        workspace: Workspace,
        kb: KnowledgeBase | str,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "robertson",
    ) -> KeywordIndex:
        """The index of a KB's keyword-searchable chunks with these settings (built once)."""
        from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

        kb_obj = workspace.get_kb(kb)
        chunks = [c for c in workspace.store.list_chunks(kb_obj.id) if c.chunk_type in SEARCHABLE_CHUNK_TYPES]
        return self.get([c.id for c in chunks], [c.content for c in chunks], k1=k1, b=b, method=method)


def use_bm25_settings(lab: Lab, kb: str, cache: Bm25IndexCache, *, k1: float, b: float, method: str) -> None:
    """Make ``kb`` search with a BM25 index of these settings (from ``cache``) in this process.

    Uses ``Workspace._kw`` (the per-KB index memo) because the workspace has no public setter yet;
    the KB's stored settings are not changed, so a new process uses them again.
    """
    ws = lab.workspace
    kb_obj = ws.get_kb(kb)
    idx = cache.for_kb(ws, kb_obj, k1=k1, b=b, method=method)
    with ws._lock:
        ws._kw[kb_obj.id] = idx


# --------------------------------------------------------------------------- enabling on a lab


@dataclass
class StageCacheHandle:
    """What :func:`enable_stage_cache` installed; ``disable()`` puts the original services back."""

    lab: Any
    cache: StageCache
    versioner: KbVersioner
    original_searcher: Any
    original_rerank_models: dict[str, Any]
    original_embedder_for: Any
    embedders: dict[int, CachingEmbedder] = field(default_factory=dict)
    active: bool = True

    def stats(self) -> dict[str, CacheStats]:
        return self.cache.stats()

    def disable(self) -> None:
        if not self.active:
            return
        s = self.lab.services
        s.searcher = self.original_searcher
        s.rerank_models = dict(self.original_rerank_models)
        s.embedder_for = self.original_embedder_for
        self.versioner.close()
        self.active = False
        if getattr(self.lab, "_stage_cache_handle", None) is self:
            self.lab._stage_cache_handle = None


def enable_stage_cache(
    lab: Lab,
    cache_dir: str | Path | StageCache,
    *,
    search: bool = True,
    rerank: bool = True,
    embeddings: bool = True,
) -> StageCacheHandle:
    """Wrap the lab's searcher, rerank models and query embedder with the stage cache.

    Calling it again on the same lab returns the active handle (with its cache).
    """
    current = getattr(lab, "_stage_cache_handle", None)
    if current is not None and current.active:
        return current
    cache = cache_dir if isinstance(cache_dir, StageCache) else StageCache(cache_dir)
    s = lab.services
    versioner = KbVersioner(lab.workspace.store.path)
    handle = StageCacheHandle(
        lab=lab,
        cache=cache,
        versioner=versioner,
        original_searcher=s.searcher,
        original_rerank_models=dict(s.rerank_models),
        original_embedder_for=s.embedder_for,
    )
    if search and s.searcher is not None:
        s.searcher = CachingSearcher(s.searcher, cache, versioner)
    if rerank:
        s.rerank_models = {k: CachingReranker(v, cache) for k, v in s.rerank_models.items()}
    if embeddings and s.embedder_for is not None:
        original: Callable[[Any], Any] = s.embedder_for

        def embedder_for(kb: Any) -> Any:
            emb = original(kb)
            if emb is None:
                return None
            wrapped = handle.embedders.get(id(emb))
            if wrapped is None or wrapped.inner is not emb:
                wrapped = CachingEmbedder(emb, cache)
                handle.embedders[id(emb)] = wrapped
            return wrapped

        s.embedder_for = embedder_for
    lab._stage_cache_handle = handle
    return handle
