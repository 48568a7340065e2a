"""The Milvus engine's configuration and data layout: :class:`MilvusConfig` (``engine:`` in the lab
config), collection names per embedding space, the BM25 analyser, filter expressions, the rows of
a chunk (one per vector entry, with the fields retrieval filters on) and what an indexing run
wrote. No client calls: :mod:`rag_lab.retrieval.milvus_engine` talks to Milvus."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.retrieval.tokenization import ENGLISH_STOPWORDS
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES, UNSEARCHABLE_STATUSES

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, KnowledgeBase

ENGINE_TYPE = "milvus"

#: the BM25 analyser of the ``text`` field (Milvus ``analyzer_params``)
ANALYZER_PARAMS: dict[str, object] = {
    "tokenizer": "jieba",
    "filter": ["lowercase", "removepunct", {"type": "stop", "stop_words": sorted(ENGLISH_STOPWORDS)}],
}
#: VARCHAR limits (bytes); chunk text longer than TEXT_MAX_BYTES is cut at a character boundary
ID_MAX_BYTES = 2048
TEXT_MAX_BYTES = 65535
_INSERT_BATCH = 256
CONSISTENCY_LEVELS = ("Strong", "Session", "Bounded", "Eventually")
FLUSH_POLICIES = ("auto", "per_write", "never")
#: how tenants' rows are kept apart (docs/scale-out.md "Tenants"); MAX_PARTITIONS: Milvus's default cap
TENANCIES = ("partition_key", "collection_per_tenant", "filter")
MAX_PARTITIONS = 1024
#: dense index types → (build parameters, search parameters) a config may set
VECTOR_INDEXES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "HNSW": (("M", "efConstruction"), ("ef",)),
    "FLAT": ((), ()),
    "IVF_FLAT": (("nlist",), ("nprobe",)),
    "IVF_SQ8": (("nlist",), ("nprobe",)),
    "IVF_PQ": (("nlist", "m", "nbits"), ("nprobe",)),
    "DISKANN": ((), ("search_list",)),
    "AUTOINDEX": ((), ("level",)),
}


def _is_int(value: object, low: int, high: int | None = None) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)


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


class _LiteIteratorTs(logging.Filter):
    """Drops pymilvus's warning that Lite gave a query iterator no MVCC timestamp (Lite has
    none to give; the client-side timestamp it falls back to is what Lite reads at)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "failed to get mvccTs" not in record.getMessage()


_LITE_ITERATOR_FILTER = _LiteIteratorTs()


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
    * ``timeout_s`` — per call;
    * ``repair_max_rows`` — a KB whose copy is missing or behind is copied again when it opens if
      it has at most this many rows (and every vector is at hand); a larger one is refused with
      the ``rag-lab reindex`` command to run (:mod:`rag_lab.retrieval.milvus_sync`);
    * ``index_type`` (``HNSW``; or ``FLAT``, ``IVF_FLAT``, ``IVF_SQ8``, ``IVF_PQ``, ``DISKANN``,
      ``AUTOINDEX``) and ``index_params`` — the dense index and its build settings (for HNSW
      ``M`` / ``efConstruction`` default to ``hnsw_m`` / ``hnsw_ef_construction``);
      ``search_params`` — its query settings (``ef`` for HNSW, default ``ef_search``;
      ``nprobe`` for IVF; ``search_list`` for DISKANN; ``level`` for AUTOINDEX);
    * ``num_shards`` (1-16) — at collection creation; ``replicas`` — in-memory replicas loaded;
    * ``search_consistency_level`` — the level each search asks for (``""``: the collection's,
      i.e. ``consistency_level`` at creation);
    * ``flush`` — ``auto`` (after each sync on Milvus Lite, never on a server, which seals
      segments itself), ``per_write`` or ``never``;
    * ``tenancy`` — ``partition_key`` (one collection per space, ``tenant_id`` its partition
      key: a search touches its tenants' partitions), ``collection_per_tenant``
      (``<collection>_t<tenant>``) or ``filter`` (one collection, a scalar filter);
      ``num_partitions`` — partitions of a partition-key collection, at creation.
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
    repair_max_rows: int = 20_000
    index_type: str = "HNSW"
    index_params: Mapping[str, object] = field(default_factory=dict)
    search_params: Mapping[str, Any] = field(default_factory=dict)
    num_shards: int = 1
    replicas: int = 1
    search_consistency_level: str = ""
    flush: str = "auto"
    tenancy: str = "partition_key"
    num_partitions: int = 64

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
            "consistency_level": self.consistency_level in CONSISTENCY_LEVELS,
            "timeout_s": isinstance(self.timeout_s, int | float) and self.timeout_s > 0,
            "repair_max_rows": _is_int(self.repair_max_rows, 0),
            "index_type": self.index_type in VECTOR_INDEXES,
            "num_shards": _is_int(self.num_shards, 1, 16),
            "replicas": _is_int(self.replicas, 1),
            "search_consistency_level": self.search_consistency_level in ("", *CONSISTENCY_LEVELS),
            "flush": self.flush in FLUSH_POLICIES,
            "tenancy": self.tenancy in TENANCIES,
            "num_partitions": _is_int(self.num_partitions, 1, MAX_PARTITIONS),
        }
        rules = {
            "uri": "a non-empty string (a .db path, http://host:19530 or a Zilliz endpoint)",
            "collection_prefix": "letters, digits and '_', not starting with a digit",
            "hnsw_m": "an integer in [2, 2048]",
            "hnsw_ef_construction": "an integer >= 1",
            "ef_search": "an integer >= 1",
            "consistency_level": "one of Strong, Session, Bounded, Eventually",
            "timeout_s": "a number > 0",
            "repair_max_rows": "an integer >= 0",
            "index_type": f"one of {', '.join(VECTOR_INDEXES)}",
            "num_shards": "an integer in [1, 16]",
            "replicas": "an integer >= 1",
            "search_consistency_level": f"'' (the collection's) or one of {', '.join(CONSISTENCY_LEVELS)}",
            "flush": f"one of {', '.join(FLUSH_POLICIES)}",
            "tenancy": f"one of {', '.join(TENANCIES)}",
            "num_partitions": f"an integer in [1, {MAX_PARTITIONS}]",
        }
        for name, ok in checks.items():
            if not ok:
                raise MilvusEngineError(f"engine.{name}={getattr(self, name)!r} must be {rules[name]}")
        if self.num_partitions != 64 and self.tenancy != "partition_key":
            raise MilvusEngineError(
                f"engine.num_partitions={self.num_partitions!r} applies only with tenancy: partition_key "
                f"(engine.tenancy is {self.tenancy!r})"
            )
        build, search = VECTOR_INDEXES[self.index_type]
        for name, allowed in (("index_params", build), ("search_params", search)):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise MilvusEngineError(
                    f"engine.{name}={value!r} must be a mapping like {{{allowed[0] if allowed else 'key'}: 16}}"
                )
            unknown = sorted(set(value) - set(allowed))
            if unknown:
                raise MilvusEngineError(
                    f"engine.{name}: {', '.join(map(str, unknown))} not valid for index_type {self.index_type} "
                    f"(allowed: {', '.join(allowed) or 'none'})"
                )
            bad = sorted(k for k, v in value.items() if not _is_int(v, 1))
            if bad:
                raise MilvusEngineError(f"engine.{name}.{bad[0]}={value[bad[0]]!r} must be an integer >= 1")
        object.__setattr__(self, "index_params", dict(self.index_params))
        object.__setattr__(self, "search_params", dict(self.search_params))

    def build_index_params(self) -> dict[str, object]:
        """The dense index's build parameters."""
        if self.index_type == "HNSW":
            return {"M": self.hnsw_m, "efConstruction": self.hnsw_ef_construction, **self.index_params}
        return dict(self.index_params)

    def dense_search_params(self, top_k: int) -> dict[str, object]:
        """The dense search's ``params`` for ``top_k`` results (a beam never narrower than top_k)."""
        params = dict(self.search_params)
        if self.index_type == "HNSW":
            params["ef"] = max(int(params.get("ef", self.ef_search)), top_k)
        elif self.index_type == "DISKANN" and "search_list" in params:
            params["search_list"] = max(int(params["search_list"]), top_k)
        return params

    @property
    def flushes(self) -> bool:
        """Whether the engine flushes after a sync (``flush: auto``: only on Milvus Lite)."""
        return self.flush == "per_write" or (self.flush == "auto" and self.is_lite)

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


def collection_name(prefix: str, kb: KnowledgeBase, tenancy: str = "partition_key") -> str:
    """The collection of a KB's embedding space (with ``collection_per_tenant``, of its owner's
    part of it: ``<space>_t<tenant id>``)."""
    if not kb.embedding_model_key or kb.embedding_dim <= 0:
        space = f"{prefix}_keywords"
    else:
        space = f"{prefix}_{hashlib.sha1(f'{kb.embedding_model_key}|{kb.embedding_dim}'.encode()).hexdigest()[:12]}"
    return f"{space}{TENANT_SUFFIX}{int(kb.tenant_id)}" if tenancy == "collection_per_tenant" else space


#: ``<space>_t<tenant>``: a tenant's collection under ``collection_per_tenant`` (tenant ids are >= 1)
TENANT_SUFFIX = "_t"


def space_of(name: str) -> str:
    """The space a tenant's collection belongs to (``name`` itself for a shared collection)."""
    head, sep, tail = name.rpartition(TENANT_SUFFIX)
    return head if sep and tail.isdigit() else name


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
    exclude_docs: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The filter expression of one search: the KBs, the searchable-chunk rules (enabled,
    searchable type, status), the owner tenants, optional document / tag filters (ANDed),
    chunks to leave out, documents to leave out per KB (``{kb id: [knowledge ids]}``: those a
    writer is writing right now) and for BM25 the keyword rows only."""
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
    for kb_id, docs in sorted((exclude_docs or {}).items()):
        if docs:
            parts.append(f"not ((kb_id == {literal(kb_id)}) and ({in_list('knowledge_id', sorted(docs))}))")
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
