"""Building a KB's knowledge graph: an extractor over the KB's chunks, one namespace per document."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_lab.asyncutil import synchronous
from rag_lab.knowledge.entities.llm import EntityExtractor
from rag_lab.knowledge.graph import (
    GraphData,
    GraphStore,
    NameSpace,
    open_graph_store,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import Chunk, KnowledgeBase
    from rag_lab.knowledge.workspace_base import WorkspaceBase

log = logging.getLogger(__name__)


# -- building a KB's graph --------------------------------------------------------------------
@dataclass(slots=True)
class GraphBuildReport:
    kb_id: str
    documents: int = 0
    chunks: int = 0
    nodes: int = 0
    relations: int = 0
    #: (chunk id, error) for chunks whose extraction failed (the rest of the document is kept)
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: documents whose namespace was dropped because they no longer exist
    removed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"GraphBuildReport(kb={self.kb_id}: {self.documents} documents, {self.chunks} chunks, "
            f"{self.nodes} nodes, {self.relations} relations, {len(self.failed)} failed, "
            f"{len(self.removed)} removed; {self.seconds:.2f}s)"
        )


def _graph_chunks(workspace: WorkspaceBase, kb_id: str, knowledge_id: str) -> list[Chunk]:
    from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

    return [
        c
        for c in workspace.store.list_chunks(kb_id, knowledge_id)
        if c.is_enabled and c.chunk_type in SEARCHABLE_CHUNK_TYPES and c.content.strip()
    ]


async def abuild_graph(
    workspace: WorkspaceBase,
    kb: KnowledgeBase | str,
    extractor: EntityExtractor,
    knowledge_ids: Sequence[str] | None = None,
    progress: bool = True,
    *,
    graph: GraphStore | None = None,
    concurrency: int = 4,
) -> GraphBuildReport:
    """Extract entities from the enabled, searchable chunks of a KB's documents (all of them, or
    ``knowledge_ids``) and replace each document's namespace with the result. A listed document
    that no longer exists has its namespace deleted. ``concurrency`` extractor calls at most."""
    from tqdm.auto import tqdm

    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency} must be >= 1")
    if not hasattr(extractor, "aextract"):
        raise TypeError(f"extractor {extractor!r} has no 'aextract(text)' method")
    t0 = time.perf_counter()
    kb_obj = workspace.get_kb(kb)
    report = GraphBuildReport(kb_id=kb_obj.id)
    store = graph if graph is not None else open_graph_store(workspace)
    owned = graph is None and store is not getattr(workspace, "graph", None)
    try:
        if knowledge_ids is None:
            docs = [d.id for d in workspace.store.list_knowledge(kb_obj.id)]
        else:
            docs = list(dict.fromkeys(knowledge_ids))
        work: list[tuple[str, list[Chunk]]] = []
        for kid in docs:
            if workspace.store.get_document(kb_obj.id, kid) is None:
                store.delete_namespace(NameSpace(kb_obj.id, kid))
                report.removed.append(kid)
                continue
            work.append((kid, _graph_chunks(workspace, kb_obj.id, kid)))
        sem = asyncio.Semaphore(concurrency)
        bar = tqdm(total=sum(len(c) for _, c in work), desc=f"graph {kb_obj.name}", unit="chunk", disable=not progress)

        async def one(chunk: Chunk) -> GraphData | None:
            async with sem:
                try:
                    got = await extractor.aextract(chunk.content)
                except Exception as exc:  # one chunk's failure does not lose the document
                    log.warning("graph extraction failed for chunk %s: %s", chunk.id, exc)
                    report.failed.append((chunk.id, f"{type(exc).__name__}: {exc}"))
                    return None
                finally:
                    bar.update(1)
            for n in got.nodes:
                n.chunk_ids = [chunk.id]
            for r in got.relations:
                r.chunk_ids = [chunk.id]
            return got

        try:
            for kid, chunks in work:
                parts = await asyncio.gather(*(one(c) for c in chunks))
                nodes = [n for p in parts if p is not None for n in p.nodes]
                rels = [r for p in parts if p is not None for r in p.relations]
                store.replace_namespace(NameSpace(kb_obj.id, kid), nodes, rels)
                n_nodes, n_rels = store.count(NameSpace(kb_obj.id, kid))
                report.documents += 1
                report.chunks += len(chunks)
                report.nodes += n_nodes
                report.relations += n_rels
        finally:
            bar.close()
    finally:
        if owned:
            store.close()
    report.seconds = time.perf_counter() - t0
    return report


build_graph = synchronous(abuild_graph, thread_name="rag_lab-build-graph")
