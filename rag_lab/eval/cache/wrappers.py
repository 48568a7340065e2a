"""Service wrappers served from the stage cache: searcher, rerank model, query embedder, and the
BM25 index cache."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np

from rag_lab.eval.cache.keys import (
    KbVersioner,
    array_digest,
    code_version,
    code_version_for,
    key_digest,
    search_kb_fields,
    search_param_fields,
    text_digest,
)
from rag_lab.eval.cache.store import StageCache

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.lab.lab import Lab
    from rag_lab.models.base import Embedder, Reranker, RerankScore
    from rag_lab.retrieval.base import SearchParams
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.retrieval.tokenization import Tokenizer
    from rag_lab.types.params import PipelineParams
    from rag_lab.types.search_result import SearchResult

# --------------------------------------------------------------------------- search


def _search_result_payload(r: SearchResult) -> dict[str, object]:
    """Every field of a SearchResult (internal ones too), JSON-ready."""
    out: dict[str, object] = {}
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

    def with_params(self, params: PipelineParams) -> CachingSearcher:
        other = self.inner.with_params(params)
        return self if other is self.inner else CachingSearcher(other, self.cache, self.versioner)

    def kb_entry(self, ws: Workspace, kb: KnowledgeBase) -> dict[str, object]:
        """The KB settings the search stage's contract declares, the content version, the BM25
        settings, the vector index policy, the engine serving the KB and the image embedder
        searching its image vectors."""
        entry: dict[str, object] = {name: getattr(kb, name) for name in search_kb_fields()}
        entry["content_version"] = self.versioner.version(kb.id)
        if kb.keyword_enabled:
            entry["bm25"] = ws.keyword_index(kb).params  # tokenizer identity, k1, b, method, dtype
        policy = ws.vector_index_policy(kb)  # HNSW answers differ from the flat scan's
        if policy is not None:
            entry["vector_index"] = dataclasses.asdict(policy)
        group, engine = self.inner.engine_for(kb)
        entry["engine"] = [str(group), f"{type(engine).__module__}.{type(engine).__qualname__}"]
        image_for = getattr(self.inner, "image_embedder_for", None)
        img = image_for(kb) if image_for is not None else None
        if img is not None:
            entry["image_embedder"] = str(getattr(img, "model_key", "") or type(img).__qualname__)
        return entry

    def code_version(self) -> str:
        """The search code version: the import closure of the searcher's, workspace's and engine
        router's modules (with the stage's default roots)."""
        router = getattr(self.inner.engine_for, "__self__", None)
        return code_version_for(self.stage, self.inner, self.inner.workspace, router)

    def search_key(self, primary_kb_id: str, sp: SearchParams) -> dict[str, object] | None:
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
        sp_fields: dict[str, object] = {}
        for f in dataclasses.fields(sp):
            v = getattr(sp, f.name)
            if f.name == "query_embedding":
                v = None if v is None else array_digest(v)
            sp_fields[f.name] = v
        params = self.inner.params
        return {
            "stage": self.stage,
            "code": self.code_version(),
            "primary": primary_kb_id,
            "search_params": sp_fields,
            "params": {name: getattr(params, name) for name in search_param_fields()},
            "kbs": {ref: self.kb_entry(ws, kb) for ref, kb in zip(refs, kbs)},
        }

    async def search(self, primary_kb_id: str, sp: SearchParams) -> list[SearchResult]:
        key = await asyncio.to_thread(self.search_key, primary_kb_id, sp)
        if key is None:
            return cast("list[SearchResult]", await self.inner.search(primary_kb_id, sp))
        payload = self.cache.get(self.stage, key)
        if payload is not None:
            return [_search_result_from_payload(d) for d in payload]
        results = await self.inner.search(primary_kb_id, sp)
        self.cache.put(self.stage, key, [_search_result_payload(r) for r in results])
        return cast("list[SearchResult]", results)

    async def search_with_paths(
        self, primary_kb_id: str, sp: SearchParams
    ) -> tuple[list[SearchResult], dict[str, object]]:
        """``search_with_paths`` of the wrapped searcher, results and per-path record cached together."""
        key = await asyncio.to_thread(self.search_key, primary_kb_id, sp)
        if key is None:
            results, paths = await self.inner.search_with_paths(primary_kb_id, sp)
            return results, paths() if callable(paths) else paths
        key = {**key, "with": "paths"}
        payload = self.cache.get(self.stage, key)
        if payload is not None:
            return [_search_result_from_payload(d) for d in payload["results"]], payload["paths"]
        results, paths = await self.inner.search_with_paths(primary_kb_id, sp)
        record = paths() if callable(paths) else paths
        self.cache.put(self.stage, key, {"results": [_search_result_payload(r) for r in results], "paths": record})
        return results, record


# --------------------------------------------------------------------------- rerank


class CachingReranker:
    """A Reranker wrapper keyed by (model id, query, passage hashes); errors are not cached."""

    stage = "rerank"

    def __init__(self, inner: Reranker, cache: StageCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = str(getattr(inner, "model_id", "") or type(inner).__name__)

    def __repr__(self) -> str:
        return f"CachingReranker({self.inner!r}, {self.cache!r})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def rerank_key(self, query: str, passages: Sequence[str]) -> dict[str, object]:
        return {
            "stage": self.stage,
            "code": code_version_for(self.stage, self.inner),
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

    def __init__(self, inner: Embedder, cache: StageCache) -> None:
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

    def embed_key(self, text: str) -> dict[str, object]:
        return {
            "stage": self.stage,
            "code": code_version_for(self.stage, self.inner),
            "model_key": self.model_key,
            "text": text,
        }

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


class _Bm25Settings(TypedDict):
    """The settings a BM25 index is built and loaded with."""

    k1: float
    b: float
    method: str
    dtype: str
    tokenizer: Tokenizer


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
        tokenizer: Tokenizer | None = None,
    ) -> dict[str, object]:
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
        tokenizer: Tokenizer | None = None,
    ) -> KeywordIndex:
        from rag_lab.retrieval.keyword_index import KeywordIndex
        from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER

        if len(chunk_ids) != len(texts):
            raise ValueError(f"Bm25IndexCache.get: {len(chunk_ids)} chunk ids for {len(texts)} texts")
        tok = tokenizer or DEFAULT_TOKENIZER
        key = self.index_key(chunk_ids, texts, k1=k1, b=b, method=method, dtype=dtype, tokenizer=tok)
        digest = key_digest(key)
        folder = self.cache.root / self.stage / digest
        settings = _Bm25Settings(k1=k1, b=b, method=method, dtype=dtype, tokenizer=tok)
        with self._lock:
            if KeywordIndex.exists(folder):
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
    """Make ``kb`` search with a BM25 index of these settings (from ``cache``) in this process
    (:meth:`~rag_lab.knowledge.workspace.Workspace.use_keyword_index`); the KB's stored settings
    are not changed, so a new process uses them again."""
    ws = lab.workspace
    kb_obj = ws.get_kb(kb)
    ws.use_keyword_index(kb_obj, cache.for_kb(ws, kb_obj, k1=k1, b=b, method=method))
