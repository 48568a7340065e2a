"""The Milvus collection layout: building it (fields, the BM25 function, the vector indexes chosen
in the config) and checking that an existing collection still has it when the engine opens it.

A collection made by another rag_lab version, by hand or with other index settings differs in
ways a search cannot work around (a missing ``tenant_id`` filter field, another analyser for
``text``, another dense dimension or index type): :func:`check_collection` lists every
difference and says how to migrate (a new ``collection_prefix``, ``rag-lab reindex`` per KB,
then drop the old collection) instead of failing later inside a search."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from rag_lab.retrieval.milvus_layout import (
    ANALYZER_PARAMS,
    ID_MAX_BYTES,
    TEXT_MAX_BYTES,
    MilvusConfig,
    MilvusEngineError,
    _require_pymilvus,
)

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase

#: scalar fields: name → (Milvus type name, max_length or None)
SCALAR_FIELDS: dict[str, tuple[str, int | None]] = {
    "id": ("VARCHAR", ID_MAX_BYTES),
    "chunk_id": ("VARCHAR", ID_MAX_BYTES),
    "knowledge_id": ("VARCHAR", ID_MAX_BYTES),
    "tag_id": ("VARCHAR", ID_MAX_BYTES),
    "kb_id": ("VARCHAR", 64),
    "is_enabled": ("BOOL", None),
    "chunk_type": ("VARCHAR", 32),
    "status": ("VARCHAR", 32),
    "tenant_id": ("INT64", None),
    "keyword_row": ("BOOL", None),
    "own_text": ("VARCHAR", TEXT_MAX_BYTES),
    "text": ("VARCHAR", TEXT_MAX_BYTES),
    "sparse": ("SPARSE_FLOAT_VECTOR", None),
}


def _dense(kb: KnowledgeBase) -> bool:
    return bool(kb.embedding_model_key and kb.embedding_dim > 0)


def build_schema(client: Any, kb: KnowledgeBase, config: MilvusConfig) -> tuple[Any, Any]:
    """(schema, index params) of the collection of ``kb``'s embedding space."""
    pymilvus = _require_pymilvus()
    DataType, Function, FunctionType = pymilvus.DataType, pymilvus.Function, pymilvus.FunctionType
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    for name, (kind, max_length) in SCALAR_FIELDS.items():
        kw: dict[str, object] = {"max_length": max_length} if max_length is not None else {}
        if name == "id":
            kw["is_primary"] = True
        if name == "text":
            kw.update(enable_analyzer=True, analyzer_params=ANALYZER_PARAMS)
        if name == "tenant_id" and config.tenancy == "partition_key":
            kw["is_partition_key"] = True  # rows hashed into num_partitions by owner; a search prunes to its tenants'
        s.add_field(name, getattr(DataType, kind), **kw)
    s.add_function(
        Function(
            name="text_bm25", function_type=FunctionType.BM25, input_field_names=["text"], output_field_names=["sparse"]
        )
    )
    ip = client.prepare_index_params()
    ip.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
    if _dense(kb):
        s.add_field("dense", DataType.FLOAT_VECTOR, dim=int(kb.embedding_dim))
        ip.add_index(
            field_name="dense", index_type=config.index_type, metric_type="COSINE", params=config.build_index_params()
        )
    return s, ip


def _type_name(value: object) -> str:
    return str(getattr(value, "name", value)).upper()


def _analyzer(params: dict[str, object]) -> object:
    raw = params.get("analyzer_params")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def schema_differences(
    desc: dict[str, Any], dense_index: dict[str, Any] | None, kb: KnowledgeBase, config: MilvusConfig
) -> list[str]:
    """What an existing collection (``describe_collection`` / ``describe_index`` of ``dense``)
    lacks or has otherwise than :func:`build_schema` would make; [] when it matches."""
    fields = {f.get("name"): f for f in desc.get("fields", [])}
    diffs: list[str] = []
    for name, (kind, max_length) in SCALAR_FIELDS.items():
        f = fields.get(name)
        if f is None:
            diffs.append(f"field {name!r} is missing")
            continue
        have = _type_name(f.get("type"))
        if have != kind:
            diffs.append(f"field {name!r} is {have}, expected {kind}")
            continue
        params = f.get("params") or {}
        if max_length is not None and int(params.get("max_length", max_length)) < max_length:
            diffs.append(f"field {name!r} holds {params.get('max_length')} bytes, expected {max_length}")
        if name == "text":
            if str(params.get("enable_analyzer", "")).lower() not in ("true", "1"):
                diffs.append("field 'text' has no analyser (BM25 needs one)")
            else:
                analyzer = _analyzer(params)
                if analyzer is not None and analyzer != ANALYZER_PARAMS:
                    diffs.append(
                        f"field 'text' is analysed with {json.dumps(analyzer)[:200]}, expected jieba + filters"
                    )
    if not any(
        list(fn.get("input_field_names") or []) == ["text"] and list(fn.get("output_field_names") or []) == ["sparse"]
        for fn in desc.get("functions") or []
    ):
        diffs.append("no BM25 function from 'text' to 'sparse'")
    tenant = fields.get("tenant_id")
    if tenant is not None and bool(tenant.get("is_partition_key")) != (config.tenancy == "partition_key"):
        have = "partition_key" if tenant.get("is_partition_key") else "filter (or collection_per_tenant)"
        diffs.append(f"its tenancy is {have}, the config asks for tenancy: {config.tenancy}")
    extra = sorted(set(fields) - set(SCALAR_FIELDS) - {"dense"})
    if extra:
        diffs.append(f"unexpected field(s) {', '.join(map(str, extra))}")
    if _dense(kb) and dense_index is not None:
        have_type = str(dense_index.get("index_type", ""))
        if have_type and have_type != config.index_type:
            diffs.append(f"the dense index is {have_type}, the config asks for {config.index_type}")
        metric = str(dense_index.get("metric_type", ""))
        if metric and metric != "COSINE":
            diffs.append(f"the dense index uses metric {metric}, expected COSINE")
    return diffs


def migration_message(name: str, kb: KnowledgeBase, config: MilvusConfig, diffs: list[str]) -> str:
    return (
        f"Milvus collection {name!r} (knowledge base {kb.name!r}) does not have the layout this rag_lab writes: "
        f"{'; '.join(diffs)}. {migration_steps([name], kb, config)}"
    )


def migration_steps(names: list[str], kb: KnowledgeBase, config: MilvusConfig) -> str:
    """How to move the KBs of the collections ``names`` to the configured layout."""
    old = ", ".join(repr(n) for n in names)
    return (
        f"Migrate: set collection_prefix: {config.collection_prefix}_v2 in the KB's engine config, run "
        f"rag-lab reindex --kb {shlex.quote(kb.name)} --engine milvus --uri {shlex.quote(config.uri)} for each KB "
        f"stored in {old}, then drop {old} (MilvusClient.drop_collection)"
    )


def check_collection(client: Any, name: str, kb: KnowledgeBase, config: MilvusConfig) -> None:
    """Raise :class:`MilvusEngineError` when the existing collection ``name`` cannot serve ``kb``."""
    desc = client.describe_collection(name)
    dims = [int((f.get("params") or {}).get("dim", 0)) for f in desc.get("fields", []) if f.get("name") == "dense"]
    want = int(kb.embedding_dim) if kb.embedding_model_key else 0
    have = dims[0] if dims else 0
    if have != want:
        raise MilvusEngineError(
            f"Milvus collection {name!r} has dense dimension {have}, but knowledge base {kb.name!r} "
            f"needs {want}; drop the collection or change collection_prefix"
        )
    dense_index = None
    if _dense(kb):
        try:
            dense_index = client.describe_index(name, "dense")
        except Exception:
            dense_index = None  # no index under that name: nothing to compare
    diffs = schema_differences(desc, dense_index, kb, config)
    if diffs:
        raise MilvusEngineError(migration_message(name, kb, config, diffs))


__all__ = [
    "SCALAR_FIELDS",
    "build_schema",
    "check_collection",
    "migration_message",
    "migration_steps",
    "schema_differences",
]
