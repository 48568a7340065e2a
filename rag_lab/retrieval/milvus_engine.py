"""MilvusEngine: a RetrieveEngine over Milvus collections, through the ``pymilvus`` client.

The same client code talks to Milvus Lite (``uri`` ending in ``.db``: an embedded server started
in-process, reached over loopback gRPC), to Milvus Standalone / Distributed
(``http://host:19530``) and to Zilliz Cloud (an ``https://`` endpoint and a token read from the
environment variable named by ``token_env``). Only the address and the credentials change.

**Layout.** One collection per embedding space (``<prefix>_<12 hex of sha1(model key|dim)>``;
keyword-only KBs share ``<prefix>_keywords``, which has no dense field). One row per vector
entry of a chunk (the chunk itself, or each question of an FAQ chunk, ids as in the local
vector index), carrying the fields retrieval filters on: ``kb_id``, ``knowledge_id``,
``tag_id``, ``is_enabled``, ``chunk_type``, ``status`` (the chunk's ``index_status``) and
``tenant_id`` (the owner tenant: a chunk belongs to its KB's tenant, docs/security.md). ``dense`` is
an HNSW index with the COSINE metric; ``sparse`` is filled by Milvus itself from ``text`` with a
``BM25`` function, analysed with the ``jieba`` tokenizer (the ``standard`` one finds nothing in
Chinese) plus lower-casing, punctuation removal and the same English stop words as the local
keyword index. Only the first row of a chunk (``keyword_row``) carries the chunk text for BM25;
the other FAQ question rows carry ``""``.

**Source of truth.** SQLite keeps the chunk rows; Milvus holds a copy kept in step by
:mod:`rag_lab.retrieval.milvus_sync`: upserts keyed by row id at ingestion (the workspace replays
the KB's journal of unacknowledged writes after each ingestion or deletion), the flags
(``is_enabled``, ``tenant_id``) updated in place when they change, the journal replayed and the
row counts compared before a KB is searched (a copy that is missing or behind is copied again or
refused with the ``rag-lab reindex`` command), ``rag-lab reindex`` for a whole copy. Hits are
hydrated from SQLite like the local engine's, so a chunk the store hides is never returned.

**Semantics** (the contract shared with :class:`~rag_lab.retrieval.engine.LocalEngine`, tested
in ``tests/retrieval/test_milvus_engine.py``): same filters, same ``top_k``; vector scores are
the cosine similarity (``>= threshold``); keyword scores are BM25 as Milvus computes them, the
keyword threshold is ignored. Milvus Lite reports BM25 as a distance (``-score``) and a Milvus
server as the score, so the score kept is its magnitude. Differences, by construction:

* BM25 statistics (document count, average length, document frequency) are those of the whole
  collection, i.e. of every KB in the embedding space, not of one KB; Milvus Lite moreover
  computes them **per segment**, so its BM25 scores differ from a Milvus server's on the same
  rows. Keyword lists are therefore compared by overlap, not score by score;
* several KBs of one collection are searched in one call (one ranking), not per KB and merged;
* image vectors stay in the workspace (image recall does not go through an engine).

The configuration, names, filters and row layout are in :mod:`rag_lab.retrieval.milvus_layout`
(re-exported here); this module holds the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.retrieval.base import IndexWithScore, SearchScope
from rag_lab.retrieval.milvus_layout import (
    _LITE_FILTER,
    _LITE_ITERATOR_FILTER,
    ANALYZER_PARAMS,
    ENGINE_TYPE,
    MilvusConfig,
    MilvusEngineError,
    _require_pymilvus,
    build_filter,
    chunk_rows,
    collection_name,
    literal,
)
from rag_lab.retrieval.milvus_schema import build_schema, check_collection
from rag_lab.retrieval.milvus_sync import IndexedCounts, MilvusSync, MilvusSyncError
from rag_lab.retrieval.milvus_tenancy import check_tenancy_layout, drop_elsewhere
from rag_lab.types.search_result import MatchType

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder


class MilvusEngine:
    """RetrieveEngine over Milvus (``pymilvus.MilvusClient``), hydrating hits from the
    workspace's SQLite store. Thread-safe (the client is shared; collection creation is locked)."""

    engine_type = ENGINE_TYPE
    #: a server (Milvus Lite included, which stands in for one): the search timeouts apply
    in_process = False

    def __init__(self, workspace: Workspace, config: MilvusConfig | Mapping[str, object], client: Any = None) -> None:
        self.workspace = workspace
        self.config = config if isinstance(config, MilvusConfig) else MilvusConfig.from_mapping(config)
        self._client = client
        self._lock = threading.RLock()
        self._ready: set[str] = set()
        #: writes, journal replay, open checks (rag_lab.retrieval.milvus_sync)
        self.sync = MilvusSync(self)

    def __repr__(self) -> str:
        return f"MilvusEngine(uri={self.config.uri!r}, prefix={self.config.collection_prefix!r})"

    # -- connection -------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                pymilvus = _require_pymilvus()
                cfg = self.config
                uri = cfg.uri
                kw: dict[str, object] = {"uri": uri, "timeout": cfg.timeout_s}
                if cfg.is_lite:
                    Path(uri).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
                    grpc_log = logging.getLogger("grpc._server")
                    if _LITE_FILTER not in grpc_log.filters:
                        grpc_log.addFilter(_LITE_FILTER)
                    iter_log = logging.getLogger("pymilvus.client.iterator.query_iterator")
                    if _LITE_ITERATOR_FILTER not in iter_log.filters:
                        iter_log.addFilter(_LITE_ITERATOR_FILTER)
                    # pymilvus pings every 10 s; Lite's in-process gRPC server keeps grpc's default
                    # policy (no pings more often than every 5 min) and answers GOAWAY otherwise
                    kw["grpc_options"] = {"grpc.keepalive_time_ms": 600_000, "grpc.keepalive_permit_without_calls": 0}
                token = cfg.token()
                if token:
                    kw["token"] = token
                if cfg.db_name:
                    kw["db_name"] = cfg.db_name
                try:
                    self._client = pymilvus.MilvusClient(**kw)
                except Exception as exc:
                    raise MilvusEngineError(f"cannot connect to Milvus at {uri!r}: {exc}") from exc
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                try:
                    self._client.close()
                finally:
                    self._client = None
                    self._ready.clear()

    def supports_vector(self) -> bool:
        return True

    def supports_keywords(self) -> bool:
        return True

    # -- schema -----------------------------------------------------------------------------
    def collection_for(self, kb: KnowledgeBase) -> str:
        return collection_name(self.config.collection_prefix, kb, self.config.tenancy)

    def _schema(self, kb: KnowledgeBase) -> tuple[Any, Any]:
        return build_schema(self.client, kb, self.config)

    def ensure_collection(self, kb: KnowledgeBase) -> str:
        """Create the collection of ``kb``'s space if it does not exist; returns its name."""
        name = self.collection_for(kb)
        with self._lock:
            if name in self._ready:
                return name
            client = self.client
            try:
                if not client.has_collection(name):
                    check_tenancy_layout(client, name, kb, self.config)  # the space in another tenancy: migrate
                    schema, index_params = self._schema(kb)
                    partitions = {"num_partitions": self.config.num_partitions} if self._partitioned else {}
                    client.create_collection(
                        name,
                        schema=schema,
                        index_params=index_params,
                        consistency_level=self.config.consistency_level,
                        num_shards=self.config.num_shards,
                        **partitions,
                    )
                    if self.config.replicas > 1:
                        client.release_collection(name)
                        client.load_collection(name, replica_number=self.config.replicas)
                else:
                    check_collection(client, name, kb, self.config)  # layout, analyser, index: or how to migrate
                    kw = {"replica_number": self.config.replicas} if self.config.replicas > 1 else {}
                    client.load_collection(name, **kw)
            except MilvusEngineError:
                raise
            except Exception as exc:
                raise MilvusEngineError(f"Milvus collection {name!r} for knowledge base {kb.name!r}: {exc}") from exc
            self._ready.add(name)
            return name

    @property
    def _partitioned(self) -> bool:
        return self.config.tenancy == "partition_key"

    # -- writing ----------------------------------------------------------------------------
    def index_documents(
        self, kb: KnowledgeBase, knowledge_ids: Sequence[str] | None = None, embedder: Embedder | None = None
    ) -> IndexedCounts:
        """Make Milvus hold SQLite's searchable rows of ``knowledge_ids`` (upserts by id, then
        deletes of the ids SQLite no longer has; :meth:`MilvusSync.write_documents`). With
        ``None`` the whole KB is copied (``rag-lab reindex``) and its journal acknowledged.
        Vectors come from the workspace's vector index; entries it lacks are embedded with
        ``embedder`` (an error without one)."""
        if knowledge_ids is not None:
            counts = self.sync.write_documents(kb, knowledge_ids, embedder)
            self._flush(counts.collection)
            return counts
        store = self.workspace.store
        with self.workspace.kb_lock(kb):
            self.sync.attach(kb)
            entries = store.sync.pending(kb.id, self.config.key)
            counts = self.sync.write_documents(kb, None, embedder)
            self._flush(counts.collection)
            store.sync.clear(kb.id, self.config.key, entries)
            store.sync.record(kb.id, self.config.key, rows=self.count(kb))
            self.sync._verified.add(kb.id)
        return counts

    def _flush(self, name: str) -> None:
        """Seal what was written, by the ``flush`` policy. Milvus Lite rebuilds the index of its
        unsealed (mutable) rows at every search, which costs ~0.3-0.7 s per query at 3k rows
        (measured), so ``auto`` flushes after each sync there; a server seals segments on its
        own (and rate-limits flush calls), so ``auto`` never flushes one."""
        if not self.config.flushes:
            return
        try:
            self.client.flush(name)
        except Exception as exc:
            raise MilvusEngineError(f"Milvus flush of {name!r} failed: {exc}") from exc

    def _delete(self, name: str, expr: str) -> None:
        try:
            self.client.delete(name, filter=expr)
        except Exception as exc:
            raise MilvusEngineError(f"Milvus delete in {name!r} failed ({expr[:200]}): {exc}") from exc

    def drop_kb(self, kb: KnowledgeBase) -> None:
        """Delete every row of ``kb`` (the collections stay: other KBs of the space share them)."""
        name = self.collection_for(kb)
        if self.client.has_collection(name):
            self._delete(name, f"kb_id == {literal(kb.id)}")
        drop_elsewhere(self, kb)  # collection_per_tenant: a former owner's collection

    def count(self, kb: KnowledgeBase) -> int:
        """Rows of ``kb`` in Milvus."""
        name = self.collection_for(kb)
        if not self.client.has_collection(name):
            return 0
        self.ensure_collection(kb)
        res = self.client.query(name, filter=f"kb_id == {literal(kb.id)}", output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    # -- searching --------------------------------------------------------------------------
    def _groups(self, kbs: Sequence[KnowledgeBase]) -> dict[str, list[KnowledgeBase]]:
        out: dict[str, list[KnowledgeBase]] = {}
        for kb in kbs:
            out.setdefault(self.collection_for(kb), []).append(kb)
        return out

    def _search(self, data: Any, scope: SearchScope, keyword: bool) -> list[tuple[str, str, str | None, str, float]]:
        local = self.workspace.engine()
        raw: list[tuple[str, str, str | None, str, float]] = []
        top_k = scope.top_k
        kbs = local._kbs(scope.kb_ids)
        if keyword:
            kbs = [k for k in kbs if k.keyword_enabled]
        else:
            kbs = [k for k in kbs if k.vector_enabled and k.embedding_model_key and k.embedding_dim > 0]
        for name, group in self._groups(kbs).items():
            # replay pending writes, compare counts on open: repaired or MilvusSyncError
            busy = {kb.id: self.sync.before_search(kb) for kb in group}
            if not self.client.has_collection(name):
                continue  # nothing indexed in this space yet (every KB of it is empty)
            self.ensure_collection(group[0])
            expr = build_filter(
                [k.id for k in group],
                sorted({k.tenant_id for k in group}),
                scope.knowledge_ids,
                scope.tag_ids,
                keyword=keyword,
                exclude_docs=busy,
            )
            if keyword:
                params: dict[str, object] = {"metric_type": "BM25"}
                field = "sparse"
            else:
                params = {"metric_type": "COSINE", "params": self.config.dense_search_params(top_k)}
                field = "dense"
            level = {"consistency_level": lvl} if (lvl := self.config.search_consistency_level) else {}
            try:
                res = self.client.search(
                    name,
                    data=[data],
                    anns_field=field,
                    limit=top_k,
                    filter=expr,
                    output_fields=["chunk_id", "kb_id", "own_text"],
                    search_params=params,
                    **level,
                )
            except Exception as exc:
                raise MilvusEngineError(f"Milvus search in {name!r} failed: {exc}") from exc
            for hit in res[0] if res else []:
                ent = hit.get("entity") or {}
                dist = float(hit.get("distance", 0.0))
                score = abs(dist) if keyword else dist  # Lite: BM25 distance = -score
                raw.append((str(hit.get("id")), ent["chunk_id"], ent.get("own_text") or None, ent["kb_id"], score))
        return raw

    def vector_search(self, embedding: np.ndarray, scope: SearchScope) -> list[IndexWithScore]:
        """Cosine search (HNSW) over the KBs' rows; scores ``>= scope.threshold``."""
        if scope.top_k <= 0:
            return []
        vec = np.asarray(embedding, dtype=np.float32).reshape(-1).tolist()
        raw = [r for r in self._search(vec, scope, keyword=False) if r[4] >= scope.threshold]
        return list(self.workspace.engine()._finish(raw, scope.top_k, int(MatchType.EMBEDDING)))

    def keyword_search(self, query: str, scope: SearchScope) -> list[IndexWithScore]:
        """Milvus BM25 over the KBs' keyword rows; ``scope.threshold`` is not applied (as the local
        engine, App. B.19)."""
        if scope.top_k <= 0 or not query or not query.strip():
            return []
        raw = [r for r in self._search(query, scope, keyword=True) if r[4] > 0]
        return list(self.workspace.engine()._finish(raw, scope.top_k, int(MatchType.KEYWORDS)))


__all__ = [
    "ENGINE_TYPE",
    "ANALYZER_PARAMS",
    "MilvusConfig",
    "MilvusEngine",
    "MilvusEngineError",
    "MilvusSyncError",
    "IndexedCounts",
    "build_filter",
    "chunk_rows",
    "collection_name",
]
