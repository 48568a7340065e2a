"""ENTITY_SEARCH: chunks of the graph nodes that match the question's entities (spec §4.4.3,
seed entity_search). Run by CHUNK_SEARCH_PARALLEL on its own clone of the chat.

1. No entities, or neither ``entity_kb_ids`` nor ``entity_knowledge``: continue.
2. Graph lookups, concurrently, one per namespace: ``NameSpace(kb, doc)`` for every document of
   ``entity_knowledge``, ``NameSpace(kb)`` for every other KB of ``entity_kb_ids`` (upstream
   queries only the document namespaces as soon as one exists; a whole KB searched together with
   documents of another KB keeps its graph here). Errors are logged and skipped. All nodes and
   relations go to ``state.graph_result``.
3. New chunk ids: each node in order, each of its chunk ids not in ``search_result`` and not seen.
4. Chunks and documents are loaded by id; kept only when the chunk belongs to a KB of the turn,
   is enabled and its document exists (and, for a document-scoped KB, is one of those
   documents); at most ``entity_search_max_chunks`` (30) are kept, in order.
5. Each becomes a SearchResult with score **0** (seed: graph hits carry no search score; the
   reranker scores them and the composite score uses the model score as their base), match
   type graph (6), ``seq = chunk_index``, metadata from the document.
6. Append, remove duplicates (§6.5); empty → ErrSearchNothing, otherwise ``next()``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.graph import GraphData, NameSpace
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrSearchNothing, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.retrieval.hybrid_search import chunk_to_search_result
from rag_lab.retrieval.image_info import enrich_search_results_image_info
from rag_lab.searchutil.dedup import remove_duplicate_results
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import EntitySearchDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.search_result import MatchType, SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Knowledge

log = logging.getLogger(__name__)

#: search score of a graph hit before rerank (seed: "Score=0")


def entity_namespaces(entity_kb_ids: list[str], entity_knowledge: dict[str, str]) -> list[NameSpace]:
    """Document namespaces of ``entity_knowledge``, then KB namespaces of the other KBs."""
    out = [NameSpace(kb, kid) for kid, kb in entity_knowledge.items() if kb]
    doc_kbs = set(entity_knowledge.values())
    out.extend(NameSpace(kb) for kb in dict.fromkeys(entity_kb_ids) if kb and kb not in doc_kbs)
    return out


def turn_kb_ids(chat: ChatManage) -> set[str]:
    """The KBs of the turn: request KBs, target KBs and the entity KBs."""
    req, state = chat.request, chat.state
    ids = set(req.knowledge_base_ids)
    ids.update(t.knowledge_base_id for t in req.search_targets if t is not None)
    ids.update(state.entity_kb_ids)
    ids.update(state.entity_knowledge.values())
    ids.discard("")
    return ids


class PluginSearchEntity(StagePlugin):
    events = (EventType.ENTITY_SEARCH,)
    contract = StageContract(
        reads=(
            "request.knowledge_base_ids",
            "request.search_targets",
            "state.entity",
            "state.entity_kb_ids",
            "state.entity_knowledge",
            "state.search_result",
        ),
        writes=("state.diagnostics.entity_search", "state.graph_result", "state.search_result"),
        params=("entity_hit_score", "entity_search_max_chunks"),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        state = chat.state
        if not state.entity:
            return await next()
        if not state.entity_kb_ids and not state.entity_knowledge:
            return await next()
        graph, ws = self.services.graph, self.services.workspace
        if graph is None or ws is None:
            log.warning("entity_search: no graph store or workspace configured")
            return await next()
        namespaces = entity_namespaces(state.entity_kb_ids, state.entity_knowledge)
        names = list(state.entity)
        found = await asyncio.gather(
            *(asyncio.to_thread(graph.search_nodes, ns, names) for ns in namespaces), return_exceptions=True
        )
        data = GraphData()
        errors: list[str] = []
        for ns, got in zip(namespaces, found):
            if isinstance(got, BaseException):
                log.warning("entity_search: graph lookup in %s failed: %s", ns, got)
                errors.append(f"{ns.knowledge_base}/{ns.knowledge}: {got}")
                continue
            data.extend(got)
        state.graph_result = data

        present = {r.id for r in state.search_result}
        new_ids: list[str] = []
        for node in data.nodes:
            for cid in node.chunk_ids:
                if cid not in present:
                    present.add(cid)
                    new_ids.append(cid)
        dropped: list[tuple[str, str]] = []
        try:
            hits = await asyncio.to_thread(self._load, chat, new_ids, dropped)
        except Exception as exc:
            log.warning("entity_search: loading graph chunks failed: %s", exc)
            errors.append(f"load: {exc}")
            hits = []
        state.search_result = remove_duplicate_results(state.search_result + hits)
        if self.services.diagnostics:
            state.diagnostics["entity_search"] = EntitySearchDiagnostics(
                entities=names,
                namespaces=[[ns.knowledge_base, ns.knowledge] for ns in namespaces],
                nodes=[(n.name, n.knowledge_id, n.score) for n in data.nodes],
                candidates=new_ids,
                kept=[h.id for h in hits],
                dropped=dropped,
                errors=errors,
            )
        if not state.search_result:
            return ErrSearchNothing
        return await next()

    def _load(self, chat: ChatManage, ids: list[str], dropped: list[tuple[str, str]]) -> list[SearchResult]:
        """The chunks of ``ids`` the turn may use, as graph hits, at most the configured number."""
        if not ids:
            return []
        ws = self.services.workspace
        if ws is None:
            return []
        store = ws.store
        limit = chat.request.params.entity_search_max_chunks
        kbs = turn_kb_ids(chat)
        doc_scope: dict[str, set[str]] = {}
        for kid, kb in chat.state.entity_knowledge.items():
            doc_scope.setdefault(kb, set()).add(kid)
        chunks: Any = store.get_chunks(ids)  # Any: mypy cannot see that a chunk is read only once the checks below pass
        by_kb: dict[str, list[str]] = {}
        for c in chunks.values():
            by_kb.setdefault(c.knowledge_base_id, []).append(c.knowledge_id)
        docs: dict[tuple[str, str], Knowledge] = {}
        for kb_id, kids in by_kb.items():
            if kb_id in kbs:
                for kid, d in store.get_knowledge(kids, kb_ids=[kb_id]).items():
                    docs[(kb_id, kid)] = d
        out: list[SearchResult] = []
        for cid in ids:
            c = chunks.get(cid)
            reason = ""
            if c is None:
                reason = "chunk not found"
            elif c.knowledge_base_id not in kbs:
                reason = "knowledge base not in this turn"
            elif not c.is_enabled:
                reason = "chunk disabled"
            elif (c.knowledge_base_id, c.knowledge_id) not in docs:
                reason = "document not found"
            elif c.knowledge_base_id in doc_scope and c.knowledge_id not in doc_scope[c.knowledge_base_id]:
                reason = "document not in scope"
            elif len(out) >= limit:
                reason = "over the entity chunk limit"
            if reason:
                dropped.append((cid, reason))
                continue
            doc = docs[(c.knowledge_base_id, c.knowledge_id)]
            out.append(chunk_to_search_result(c, doc, chat.request.params.entity_hit_score, MatchType.GRAPH))
        enrich_search_results_image_info(out, store)  # step 7 (§6.9)
        return out
