"""Tenants in Milvus: how the rows of different owner tenants are kept apart (``tenancy`` in the
engine config, :class:`~rag_lab.retrieval.milvus_layout.MilvusConfig`).

* ``partition_key`` (default): one collection per embedding space whose ``tenant_id`` field is
  the partition key; Milvus hashes each row into one of ``num_partitions`` partitions by owner,
  and a search whose filter names its tenants (``tenant_id in [...]``) reads only theirs. An
  owner change is a partial upsert of ``tenant_id``: Milvus moves the row to the new owner's
  partition.
* ``collection_per_tenant``: one collection per (space, owner tenant), ``<space>_t<tenant id>``.
  A KB lives in its owner's collection; an owner change copies the KB into the new owner's
  collection, then deletes it from the others of the space.
* ``filter``: one collection per space, ``tenant_id`` a plain scalar field (the layout before
  partition keys).

In every layout the search filter names the owner tenants of the KBs searched, and those KBs were
access-checked before (§5.3: the caller's own KBs and those shared with it, HybridSearch's
``_load_kbs``): a KB's rows carry its owner's tenant, so a caller reaches another tenant's rows
only through a KB shared with it, and every layout returns the local engine's hits.

A layout cannot be changed in place: the schema check on open reports a collection with another
tenancy (:func:`rag_lab.retrieval.milvus_schema.schema_differences`), and
:func:`check_tenancy_layout` reports the space's collections of the other naming (one collection
per tenant vs one shared), each with the migration (a new ``collection_prefix``, ``rag-lab
reindex`` per KB, drop the old collections)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rag_lab.retrieval.milvus_layout import MilvusConfig, MilvusEngineError, literal, space_of
from rag_lab.retrieval.milvus_schema import migration_steps

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.retrieval.milvus_engine import MilvusEngine

PER_TENANT = "collection_per_tenant"


def space_collections(client: Any, space: str) -> list[str]:
    """The existing collections of the embedding space ``space`` in either naming: the shared
    ``space`` and the per-tenant ``space_t<n>``."""
    return sorted(str(n) for n in client.list_collections() if space_of(str(n)) == space)


def check_tenancy_layout(client: Any, name: str, kb: KnowledgeBase, config: MilvusConfig) -> None:
    """Before creating ``name``: raise :class:`MilvusEngineError` when the space already exists
    under the other naming (the tenancy changed while the prefix did not)."""
    space = space_of(name)
    existing = space_collections(client, space)
    if config.tenancy == PER_TENANT:
        others, had = [n for n in existing if n == space], "one collection for every tenant"
    else:
        others, had = [n for n in existing if n != space], f"tenancy: {PER_TENANT}"
    if others:
        raise MilvusEngineError(
            f"Milvus collection(s) {', '.join(repr(n) for n in others)} hold the embedding space of knowledge base "
            f"{kb.name!r} with {had}; the config asks for tenancy: {config.tenancy} (collection {name!r}). "
            f"{migration_steps(others, kb, config)}"
        )


def drop_elsewhere(engine: MilvusEngine, kb: KnowledgeBase) -> int:
    """``collection_per_tenant``: delete ``kb``'s rows from the collections of its space other
    than its owner's (a former owner's). Returns the collections it deleted from."""
    if engine.config.tenancy != PER_TENANT:
        return 0
    mine = engine.collection_for(kb)
    others = [n for n in space_collections(engine.client, space_of(mine)) if n != mine]
    for name in others:
        engine._delete(name, f"kb_id == {literal(kb.id)}")
    return len(others)


__all__ = ["PER_TENANT", "check_tenancy_layout", "drop_elsewhere", "space_collections"]
