"""Pairs of chunks from two documents that the KB's entity graph links (for multi-hop questions).

Two chunks are linked when a graph node of one document and a node of another document have the
same normalised name (:func:`rag_lab.knowledge.graph.normalize_entity_name`) and each node lists
the chunk among its ``chunk_ids``: the entity the two documents share is the hop.

The graph is the one ingestion builds (``graph_enabled`` KBs, or :func:`build_graph`). A KB
without one gets the offline extractor's graph of its chunks, computed here and not stored
(``source`` says which).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_lab.eval.testset.generate import SourceChunk
from rag_lab.knowledge.graph import GraphNode, NameSpace, normalize_entity_name

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.lab.lab import Lab

__all__ = ["LinkedPair", "entity_nodes", "linked_pairs"]

#: an entity named in more documents than this is too common to make a question need both
MAX_ENTITY_DOCS = 8


@dataclass(frozen=True, slots=True)
class LinkedPair:
    a: SourceChunk
    b: SourceChunk
    entity: str


def entity_nodes(lab: Lab, kb: KnowledgeBase, sources: Sequence[SourceChunk]) -> tuple[list[GraphNode], str]:
    """The KB's graph nodes and where they came from (``"stored graph"`` or ``"offline extractor
    (not stored)"``)."""
    nodes = list(lab.workspace.graph.get_graph(NameSpace(kb.id)).nodes)
    if nodes:
        return nodes, "stored graph"
    from rag_lab.knowledge.entities import OfflineEntityExtractor

    ex = OfflineEntityExtractor()
    for s in sources:
        for n in ex.extract(s.text).nodes:
            n.chunk_ids, n.knowledge_id = [s.chunk_id], s.doc_id
            nodes.append(n)
    return nodes, "offline extractor (not stored)"


def linked_pairs(nodes: Sequence[GraphNode], sources: Sequence[SourceChunk], seed: int) -> list[LinkedPair]:
    """Linked chunk pairs in a seeded order, no document pair twice and, while possible, no
    document twice (entities shared by few documents first: the rarer the hop, the more the
    question needs both passages)."""
    by_chunk = {s.chunk_id: s for s in sources}
    # entity → document → its chunks mentioning the entity
    where: dict[str, dict[str, list[str]]] = {}
    names: dict[str, str] = {}
    for n in nodes:
        key = normalize_entity_name(n.name)
        if not key:
            continue
        names.setdefault(key, n.name)
        for cid in n.chunk_ids:
            src = by_chunk.get(cid)
            if src is not None:
                where.setdefault(key, {}).setdefault(src.doc_id, []).append(cid)
    rng = random.Random(seed)
    options: list[tuple[int, float, str]] = []
    for key, docs in where.items():
        if 2 <= len(docs) <= MAX_ENTITY_DOCS:
            options.append((len(docs), rng.random(), key))
    options.sort()
    pairs: list[LinkedPair] = []
    used_docs: set[str] = set()
    used_pairs: set[frozenset[str]] = set()
    rest: list[LinkedPair] = []
    for _, _, key in options:
        docs = sorted(where[key])
        rng.shuffle(docs)
        da, db = docs[0], docs[1]
        fresh = [d for d in docs if d not in used_docs]
        if len(fresh) >= 2:
            da, db = fresh[0], fresh[1]
        if frozenset((da, db)) in used_pairs:
            continue
        ca = by_chunk[rng.choice(sorted(set(where[key][da])))]
        cb = by_chunk[rng.choice(sorted(set(where[key][db])))]
        pair = LinkedPair(ca, cb, names[key])
        used_pairs.add(frozenset((da, db)))
        if da in used_docs or db in used_docs:
            rest.append(pair)
        else:
            pairs.append(pair)
            used_docs.update((da, db))
    return pairs + rest
