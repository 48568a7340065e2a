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

**Source of truth.** SQLite keeps the chunk rows; Milvus holds a copy written at ingestion
(:meth:`MilvusEngine.index_documents`, called by the workspace after each ingestion of a KB
bound to this engine) or rebuilt by ``rag-lab reindex``. Every search is filtered in Milvus on
the copied flags *and* excludes the chunks SQLite currently says are unsearchable (disabled,
``processing``/``failed``), then hydrated from SQLite like the local engine's hits, so a stale
copy can shorten a list but never return a chunk the store would hide.

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
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.retrieval.base import IndexWithScore
from rag_lab.retrieval.tokenization import ENGLISH_STOPWORDS
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES, UNSEARCHABLE_STATUSES, MatchType

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder

ENGINE_TYPE = "milvus"

#: the BM25 analyser of the ``text`` field (Milvus ``analyzer_params``)
ANALYZER_PARAMS: dict[str, Any] = {
    "tokenizer": "jieba",
    "filter": ["lowercase", "removepunct", {"type": "stop", "stop_words": sorted(ENGLISH_STOPWORDS)}],
}
#: VARCHAR limits (bytes); chunk text longer than TEXT_MAX_BYTES is cut at a character boundary
ID_MAX_BYTES = 2048
TEXT_MAX_BYTES = 65535
_INSERT_BATCH = 256


class MilvusEngineError(RuntimeError):
    """A Milvus engine that cannot be configured, reached or written; the message names the
    setting, the KB or the chunk."""


class _LiteUnimplemented(logging.Filter):
    """Drops the in-process Lite server's error log for RPCs it does not implement
    (``AllocTimestamp``, which pymilvus calls while waiting for an index and then does without)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, NotImplementedError) and "Method not implemented" in str(exc))


_LITE_FILTER = _LiteUnimplemented()


def _require_pymilvus() -> Any:
    try:
        import pymilvus
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise MilvusEngineError(
            "the Milvus engine needs pymilvus (and milvus-lite for a local .db file): pip install 'rag_lab[milvus]'"
        ) from None
    return pymilvus


@dataclass(frozen=True, slots=True)
class MilvusConfig:
    """``engine: {type: milvus, ...}`` in the lab config.

    * ``uri`` — ``path/to/file.db`` (Milvus Lite, relative to the current directory),
      ``http://host:19530`` (Standalone / Distributed) or a Zilliz Cloud endpoint;
    * ``token_env`` — name of the environment variable holding the token (``user:password`` or
      an API key); the token itself never sits in the config file;
    * ``db_name`` — Milvus database (``""`` = the server's default);
    * ``collection_prefix`` — collection names start with it (letters, digits, ``_``);
    * ``hnsw_m``, ``hnsw_ef_construction`` — HNSW build settings; ``ef_search`` — query beam
      width (``max(ef_search, top_k)`` is used);
    * ``consistency_level`` — ``Strong`` (default: a search sees the rows just ingested),
      ``Session``, ``Bounded`` or ``Eventually``;
    * ``timeout_s`` — per call.
    """

    uri: str
    token_env: str = ""
    db_name: str = ""
    collection_prefix: str = "rag_lab"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 200
    ef_search: int = 128
    consistency_level: str = "Strong"
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        prefix = self.collection_prefix
        checks = {
            "uri": isinstance(self.uri, str) and bool(self.uri.strip()),
            "collection_prefix": isinstance(prefix, str)
            and bool(prefix)
            and (prefix[0].isalpha() or prefix[0] == "_")
            and all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in prefix),
            "hnsw_m": isinstance(self.hnsw_m, int) and 2 <= self.hnsw_m <= 2048,
            "hnsw_ef_construction": isinstance(self.hnsw_ef_construction, int) and self.hnsw_ef_construction >= 1,
            "ef_search": isinstance(self.ef_search, int) and self.ef_search >= 1,
            "consistency_level": self.consistency_level in ("Strong", "Session", "Bounded", "Eventually"),
            "timeout_s": isinstance(self.timeout_s, int | float) and self.timeout_s > 0,
        }
        rules = {
            "uri": "a non-empty string (a .db path, http://host:19530 or a Zilliz endpoint)",
            "collection_prefix": "letters, digits and '_', not starting with a digit",
            "hnsw_m": "an integer in [2, 2048]",
            "hnsw_ef_construction": "an integer >= 1",
            "ef_search": "an integer >= 1",
            "consistency_level": "one of Strong, Session, Bounded, Eventually",
            "timeout_s": "a number > 0",
        }
        for name, ok in checks.items():
            if not ok:
                raise MilvusEngineError(f"engine.{name}={getattr(self, name)!r} must be {rules[name]}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "engine") -> MilvusConfig:
        """From ``{type: milvus, uri: ..., ...}``; unknown keys are an error naming them."""
        d = {k: v for k, v in dict(data).items() if k != "type"}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise MilvusEngineError(
                f"{source}: unknown key(s) {', '.join(unknown)}; allowed: type, {', '.join(sorted(known))}"
            )
        if "uri" not in d:
            raise MilvusEngineError(f"{source}: a milvus engine needs 'uri' (a .db path or http://host:19530)")
        try:
            return cls(**d)
        except MilvusEngineError as exc:
            raise MilvusEngineError(f"{source}: {exc}") from None

    @property
    def is_lite(self) -> bool:
        return self.uri.endswith(".db")

    def token(self) -> str:
        """The token from ``token_env`` ("" without one); a named but unset variable is an error."""
        if not self.token_env:
            return ""
        value = os.environ.get(self.token_env)
        if value is None:
            raise MilvusEngineError(f"engine.token_env: environment variable {self.token_env!r} is not set")
        return value

    @property
    def key(self) -> str:
        """Identity of the store (the HybridSearch store-group key)."""
        return f"milvus:{self.uri}|{self.db_name}|{self.collection_prefix}"


def collection_name(prefix: str, kb: KnowledgeBase) -> str:
    """The collection of a KB's embedding space."""
    if not kb.embedding_model_key or kb.embedding_dim <= 0:
        return f"{prefix}_keywords"
    digest = hashlib.sha1(f"{kb.embedding_model_key}|{kb.embedding_dim}".encode()).hexdigest()[:12]
    return f"{prefix}_{digest}"


def literal(value: str | int | bool) -> str:
    """A value as a Milvus filter-expression literal (strings double-quoted and escaped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def in_list(field_name: str, values: Iterable[str | int], negate: bool = False) -> str:
    vals = list(dict.fromkeys(values))
    return f"{field_name} {'not in' if negate else 'in'} [{', '.join(literal(v) for v in vals)}]"


def build_filter(
    kb_ids: Sequence[str],
    tenant_ids: Sequence[int],
    knowledge_ids: Sequence[str] = (),
    tag_ids: Sequence[str] = (),
    exclude_chunk_ids: Sequence[str] = (),
    keyword: bool = False,
) -> str:
    """The filter expression of one search: the KBs, the searchable-chunk rules (enabled,
    searchable type, status), the owner tenants, optional document / tag filters (ANDed), the
    chunks SQLite says are unsearchable, and for BM25 the keyword rows only."""
    parts = [
        in_list("kb_id", kb_ids),
        "is_enabled == true",
        in_list("chunk_type", sorted(SEARCHABLE_CHUNK_TYPES)),
        in_list("status", UNSEARCHABLE_STATUSES, negate=True),
    ]
    if tenant_ids:
        parts.append(in_list("tenant_id", tenant_ids))
    if knowledge_ids:
        parts.append(in_list("knowledge_id", knowledge_ids))
    if tag_ids:
        parts.append(in_list("tag_id", tag_ids))
    if exclude_chunk_ids:
        parts.append(in_list("chunk_id", sorted(exclude_chunk_ids), negate=True))
    if keyword:
        parts.append("keyword_row == true")
    return " and ".join(f"({p})" for p in parts)


def _cut_utf8(text: str, max_bytes: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def _check_id(value: str, what: str, chunk_id: str) -> str:
    if len(value.encode("utf-8")) > ID_MAX_BYTES:
        raise MilvusEngineError(
            f"chunk {chunk_id!r}: {what} is {len(value.encode('utf-8'))} bytes, over the {ID_MAX_BYTES}-byte "
            "Milvus field limit"
        )
    return value


def chunk_rows(kb: KnowledgeBase, chunk: Chunk, vectors: Mapping[str, np.ndarray] | None) -> list[dict[str, Any]]:
    """The Milvus rows of one searchable chunk: one per vector entry (ids and own texts as the
    local vector index has them), or one row without a vector in a keyword-only space.
    ``vectors`` maps entry ids to their vectors; a missing one is an error naming the entry."""
    from rag_lab.retrieval.spaces import vector_entries

    tenant = int(kb.tenant_id)  # a chunk belongs to its KB's owner tenant (docs/security.md)
    base = {
        "chunk_id": _check_id(chunk.id, "the chunk id", chunk.id),
        "kb_id": chunk.knowledge_base_id,
        "knowledge_id": _check_id(chunk.knowledge_id, "the knowledge id", chunk.id),
        "tag_id": _check_id(chunk.tag_id or "", "the tag id", chunk.id),
        "is_enabled": bool(chunk.is_enabled),
        "chunk_type": chunk.chunk_type,
        "status": chunk.index_status,
        "tenant_id": tenant,
    }
    text = _cut_utf8(chunk.content, TEXT_MAX_BYTES)
    if vectors is None:
        return [{**base, "id": chunk.id, "own_text": "", "text": text, "keyword_row": True}]
    rows = []
    for i, (entry_id, own, _) in enumerate(vector_entries(chunk)):
        vec = vectors.get(entry_id)
        if vec is None:
            raise MilvusEngineError(
                f"knowledge base {kb.name!r}: no vector for entry {entry_id!r} of chunk {chunk.id!r} "
                "(re-ingest the document, or reindex with an embedder)"
            )
        rows.append(
            {
                **base,
                "id": _check_id(entry_id, "the entry id", chunk.id),
                "own_text": _cut_utf8(own or "", TEXT_MAX_BYTES),
                "text": text if i == 0 else "",
                "keyword_row": i == 0,
                "dense": np.asarray(vec, dtype=np.float32).tolist(),
            }
        )
    return rows


@dataclass(slots=True)
class IndexedCounts:
    """What :meth:`MilvusEngine.index_documents` wrote."""

    kb_id: str
    collection: str
    documents: int = 0
    chunks: int = 0
    rows: int = 0
    embedded: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.rows} rows ({self.chunks} chunks of {self.documents} documents, {self.embedded} embedded) "
            f"into {self.collection} in {self.seconds:.2f}s"
        )


class MilvusEngine:
    """RetrieveEngine over Milvus (``pymilvus.MilvusClient``), hydrating hits from the
    workspace's SQLite store. Thread-safe (the client is shared; collection creation is locked)."""

    engine_type = ENGINE_TYPE

    def __init__(self, workspace: Workspace, config: MilvusConfig | Mapping[str, Any], client: Any = None) -> None:
        self.workspace = workspace
        self.config = config if isinstance(config, MilvusConfig) else MilvusConfig.from_mapping(config)
        self._client = client
        self._lock = threading.RLock()
        self._ready: set[str] = set()

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
                kw: dict[str, Any] = {"uri": uri, "timeout": cfg.timeout_s}
                if cfg.is_lite:
                    Path(uri).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
                    grpc_log = logging.getLogger("grpc._server")
                    if _LITE_FILTER not in grpc_log.filters:
                        grpc_log.addFilter(_LITE_FILTER)
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
        return collection_name(self.config.collection_prefix, kb)

    def _schema(self, kb: KnowledgeBase) -> tuple[Any, Any]:
        pymilvus = _require_pymilvus()
        DataType, Function, FunctionType = pymilvus.DataType, pymilvus.Function, pymilvus.FunctionType
        client = self.client
        s = client.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=ID_MAX_BYTES)
        for name in ("chunk_id", "knowledge_id", "tag_id"):
            s.add_field(name, DataType.VARCHAR, max_length=ID_MAX_BYTES)
        s.add_field("kb_id", DataType.VARCHAR, max_length=64)
        s.add_field("is_enabled", DataType.BOOL)
        s.add_field("chunk_type", DataType.VARCHAR, max_length=32)
        s.add_field("status", DataType.VARCHAR, max_length=32)
        s.add_field("tenant_id", DataType.INT64)
        s.add_field("keyword_row", DataType.BOOL)
        s.add_field("own_text", DataType.VARCHAR, max_length=TEXT_MAX_BYTES)
        s.add_field(
            "text", DataType.VARCHAR, max_length=TEXT_MAX_BYTES, enable_analyzer=True, analyzer_params=ANALYZER_PARAMS
        )
        s.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        s.add_function(
            Function(
                name="text_bm25",
                function_type=FunctionType.BM25,
                input_field_names=["text"],
                output_field_names=["sparse"],
            )
        )
        ip = client.prepare_index_params()
        ip.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        if kb.embedding_model_key and kb.embedding_dim > 0:
            s.add_field("dense", DataType.FLOAT_VECTOR, dim=int(kb.embedding_dim))
            ip.add_index(
                field_name="dense",
                index_type="HNSW",
                metric_type="COSINE",
                params={"M": self.config.hnsw_m, "efConstruction": self.config.hnsw_ef_construction},
            )
        return s, ip

    def ensure_collection(self, kb: KnowledgeBase) -> str:
        """Create the collection of ``kb``'s space if it does not exist; returns its name."""
        name = self.collection_for(kb)
        with self._lock:
            if name in self._ready:
                return name
            client = self.client
            try:
                if not client.has_collection(name):
                    schema, index_params = self._schema(kb)
                    client.create_collection(
                        name,
                        schema=schema,
                        index_params=index_params,
                        consistency_level=self.config.consistency_level,
                    )
                else:
                    self._check_existing(name, kb)
                    client.load_collection(name)
            except MilvusEngineError:
                raise
            except Exception as exc:
                raise MilvusEngineError(f"Milvus collection {name!r} for knowledge base {kb.name!r}: {exc}") from exc
            self._ready.add(name)
            return name

    def _check_existing(self, name: str, kb: KnowledgeBase) -> None:
        desc = self.client.describe_collection(name)
        dims = [int((f.get("params") or {}).get("dim", 0)) for f in desc.get("fields", []) if f.get("name") == "dense"]
        want = int(kb.embedding_dim) if kb.embedding_model_key else 0
        have = dims[0] if dims else 0
        if have != want:
            raise MilvusEngineError(
                f"Milvus collection {name!r} has dense dimension {have}, but knowledge base {kb.name!r} "
                f"needs {want}; drop the collection or change collection_prefix"
            )

    # -- writing ----------------------------------------------------------------------------
    def _local_vectors(self, kb: KnowledgeBase, chunk_ids: set[str]) -> dict[str, np.ndarray]:
        index = self.workspace.vector_index(kb)
        if index is None or len(index) == 0:
            return {}
        entries, vecs = index.export_vectors()
        return {e.entry_id: vecs[i] for i, e in enumerate(entries) if e.chunk_id in chunk_ids}

    def index_documents(
        self, kb: KnowledgeBase, knowledge_ids: Sequence[str] | None = None, embedder: Embedder | None = None
    ) -> IndexedCounts:
        """Write the searchable chunks of ``knowledge_ids`` (``None``: the whole KB) from SQLite,
        replacing whatever Milvus held for them. Vectors come from the workspace's vector index;
        entries it lacks are embedded with ``embedder`` (an error without one)."""
        t0 = time.perf_counter()
        name = self.ensure_collection(kb)
        store = self.workspace.store
        counts = IndexedCounts(kb_id=kb.id, collection=name)
        if knowledge_ids is None:
            chunks = store.list_chunks(kb.id)
            docs = {c.knowledge_id for c in chunks}
            self._delete(name, f"kb_id == {literal(kb.id)}")
        else:
            docs = set(knowledge_ids)
            chunks = [c for kid in sorted(docs) for c in store.list_chunks(kb.id, kid)]
            if docs:
                self._delete(name, f"(kb_id == {literal(kb.id)}) and ({in_list('knowledge_id', sorted(docs))})")
        chunks = [c for c in chunks if c.chunk_type in SEARCHABLE_CHUNK_TYPES]
        counts.documents, counts.chunks = len(docs), len(chunks)
        dense = bool(kb.embedding_model_key and kb.embedding_dim > 0)
        vectors: dict[str, np.ndarray] | None = None
        if dense:
            vectors = self._local_vectors(kb, {c.id for c in chunks})
            counts.embedded = self._embed_missing(kb, chunks, vectors, embedder)
        batch: list[dict[str, Any]] = []
        for c in chunks:
            batch.extend(chunk_rows(kb, c, vectors))
            if len(batch) >= _INSERT_BATCH:
                counts.rows += self._insert(name, batch)
                batch = []
        if batch:
            counts.rows += self._insert(name, batch)
        self._flush(name)
        counts.seconds = time.perf_counter() - t0
        return counts

    def _flush(self, name: str) -> None:
        """Seal what was written. Milvus Lite rebuilds the index of its unsealed (mutable) rows at
        every search, which costs ~0.3-0.7 s per query at 3k rows (measured); a server seals on
        its own, and one flush per ingestion call is cheap there."""
        try:
            self.client.flush(name)
        except Exception as exc:
            raise MilvusEngineError(f"Milvus flush of {name!r} failed: {exc}") from exc

    def _embed_missing(
        self, kb: KnowledgeBase, chunks: Sequence[Chunk], vectors: dict[str, np.ndarray], embedder: Embedder | None
    ) -> int:
        from rag_lab.retrieval.spaces import vector_entries

        missing = [(eid, text) for c in chunks for eid, _, text in vector_entries(c) if eid not in vectors]
        if not missing or embedder is None:
            return 0  # chunk_rows names the first missing entry
        from rag_lab.retrieval.spaces import check_embedder

        check_embedder(kb, embedder)
        for start in range(0, len(missing), 64):
            part = missing[start : start + 64]
            vecs = np.asarray(embedder.embed([t for _, t in part]), dtype=np.float32)
            for (eid, _), v in zip(part, vecs):
                vectors[eid] = v
        return len(missing)

    def _insert(self, name: str, rows: list[dict[str, Any]]) -> int:
        try:
            res = self.client.insert(name, rows)
        except Exception as exc:
            raise MilvusEngineError(f"Milvus insert into {name!r} failed (first row {rows[0]['id']!r}): {exc}") from exc
        return int(res.get("insert_count", len(rows))) if isinstance(res, Mapping) else len(rows)

    def _delete(self, name: str, expr: str) -> None:
        try:
            self.client.delete(name, filter=expr)
        except Exception as exc:
            raise MilvusEngineError(f"Milvus delete in {name!r} failed ({expr[:200]}): {exc}") from exc

    def delete_documents(self, kb: KnowledgeBase, knowledge_ids: Sequence[str]) -> None:
        if knowledge_ids:
            name = self.ensure_collection(kb)
            self._delete(name, f"(kb_id == {literal(kb.id)}) and ({in_list('knowledge_id', sorted(knowledge_ids))})")
            self._flush(name)

    def drop_kb(self, kb: KnowledgeBase) -> None:
        """Delete every row of ``kb`` (the collection stays: other KBs of the space share it)."""
        name = self.collection_for(kb)
        if self.client.has_collection(name):
            self._delete(name, f"kb_id == {literal(kb.id)}")

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

    def _search(
        self,
        kb_ids: Sequence[str],
        data: Any,
        top_k: int,
        knowledge_ids: Sequence[str],
        tag_ids: Sequence[str],
        keyword: bool,
    ) -> list[tuple[str, str, str | None, str, float]]:
        local = self.workspace.engine()
        store = self.workspace.store
        raw: list[tuple[str, str, str | None, str, float]] = []
        kbs = local._kbs(kb_ids)
        if keyword:
            kbs = [k for k in kbs if k.keyword_enabled]
        else:
            kbs = [k for k in kbs if k.vector_enabled and k.embedding_model_key and k.embedding_dim > 0]
        for name, group in self._groups(kbs).items():
            if not self.client.has_collection(name):
                continue  # nothing indexed in this space yet
            self.ensure_collection(group[0])
            excluded = sorted({cid for kb in group for cid in store.unsearchable_chunk_ids(kb.id)})
            expr = build_filter(
                [k.id for k in group],
                sorted({k.tenant_id for k in group}),
                knowledge_ids,
                tag_ids,
                excluded,
                keyword=keyword,
            )
            if keyword:
                params: dict[str, Any] = {"metric_type": "BM25"}
                field = "sparse"
            else:
                params = {"metric_type": "COSINE", "params": {"ef": max(self.config.ef_search, top_k)}}
                field = "dense"
            try:
                res = self.client.search(
                    name,
                    data=[data],
                    anns_field=field,
                    limit=top_k,
                    filter=expr,
                    output_fields=["chunk_id", "kb_id", "own_text"],
                    search_params=params,
                )
            except Exception as exc:
                raise MilvusEngineError(f"Milvus search in {name!r} failed: {exc}") from exc
            for hit in res[0] if res else []:
                ent = hit.get("entity") or {}
                dist = float(hit.get("distance", 0.0))
                score = abs(dist) if keyword else dist  # Lite: BM25 distance = -score
                raw.append((str(hit.get("id")), ent["chunk_id"], ent.get("own_text") or None, ent["kb_id"], score))
        return raw

    def vector_search(
        self,
        kb_ids: Sequence[str],
        embedding: np.ndarray,
        top_k: int,
        threshold: float,
        knowledge_ids: Sequence[str] = (),
        tag_ids: Sequence[str] = (),
    ) -> list[IndexWithScore]:
        """Cosine search (HNSW) over the KBs' rows; scores ``>= threshold``."""
        if top_k <= 0:
            return []
        vec = np.asarray(embedding, dtype=np.float32).reshape(-1).tolist()
        raw = self._search(kb_ids, vec, top_k, knowledge_ids, tag_ids, keyword=False)
        raw = [r for r in raw if r[4] >= threshold]
        return self.workspace.engine()._finish(raw, top_k, int(MatchType.EMBEDDING))

    def keyword_search(
        self,
        kb_ids: Sequence[str],
        query: str,
        top_k: int,
        threshold: float,
        knowledge_ids: Sequence[str] = (),
        tag_ids: Sequence[str] = (),
    ) -> list[IndexWithScore]:
        """Milvus BM25 over the KBs' keyword rows; ``threshold`` is not applied (as the local
        engine, App. B.19)."""
        del threshold
        if top_k <= 0 or not query or not query.strip():
            return []
        raw = self._search(kb_ids, query, top_k, knowledge_ids, tag_ids, keyword=True)
        raw = [r for r in raw if r[4] > 0]
        return self.workspace.engine()._finish(raw, top_k, int(MatchType.KEYWORDS))


__all__ = [
    "ENGINE_TYPE",
    "ANALYZER_PARAMS",
    "MilvusConfig",
    "MilvusEngine",
    "MilvusEngineError",
    "IndexedCounts",
    "build_filter",
    "chunk_rows",
    "collection_name",
]
