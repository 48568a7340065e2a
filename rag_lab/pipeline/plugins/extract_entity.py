"""ExtractEntity: the inner plugin of QUERY_UNDERSTAND (spec §4.3.7, seed PluginExtractEntity).

Runs after the rewrite (QueryUnderstand calls ``next()`` once its state is written) and fills
``state.entity`` (names), ``state.entity_kb_ids`` and ``state.entity_knowledge`` for ENTITY_SEARCH.

It is active when a graph store is configured (``Services.graph``; this replaces upstream's
``NEO4J_ENABLE`` environment switch), the intent needs KB retrieval, and at least one KB in the
turn's scope has graph extraction enabled (``kb.metadata["graph_enabled"]``). The question (the
rewrite when there is one) goes to the chat model with the few-shot "Q:/A:" prompt of
``extract_entity.yaml`` (temperature 0.3, 4096 tokens, thinking off); a chat model that cannot
follow instructions (the offline extractive answerer), or no chat model at all, is replaced by the
offline extractor run on the question. Any error means no entities, and the stage continues.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.entities import OfflineEntityExtractor, parse_graph_reply
from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import EntityExtractionDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_kb_retrieval

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import Services

log = logging.getLogger(__name__)

EXTRACT_ENTITY_TEMPLATE_ID = "default_extract_entity"


def graph_enabled(kb: object) -> bool:
    """True when the KB asks for a knowledge graph (``metadata["graph_enabled"]``)."""
    meta = getattr(kb, "metadata", None) or {}
    return bool(meta.get("graph_enabled"))


def example_items(example: Mapping[str, Any]) -> list[dict[str, object]]:
    """One template example as the JSON list the model is shown (nodes, then relations)."""
    items: list[dict[str, object]] = []
    for node in example.get("nodes") or []:
        items.append({"entity": str(node["name"]), "entity_attributes": [str(a) for a in node.get("attributes") or []]})
    for rel in example.get("relations") or []:
        items.append({"entity1": str(rel["node1"]), "entity2": str(rel["node2"]), "relation": str(rel["type"])})
    return items


def build_extract_entity_messages(description: str, examples: list[dict[str, object]], query: str) -> list[ChatMessage]:
    """The few-shot prompt of §4.3.7 step 4: system = description, ``# Examples``, each example
    as ``Q: text`` / ``A: `` + fenced JSON list (2-space indent) and a blank line; user =
    ``# Question\\nQ: <query>\\nA: ``."""
    parts = [description.rstrip("\n"), "", "# Examples"]
    for i, ex in enumerate(examples):
        if not isinstance(ex, dict) or not isinstance(ex.get("text"), str):
            raise ValueError(f"extract-entity example #{i + 1} needs a string 'text' field, got {ex!r}")
        body = json.dumps(example_items(ex), ensure_ascii=False, indent=2)
        parts.append(f"Q: {ex['text']}")
        parts.append(f"A: ```json\n{body}\n```")
        parts.append("")
    system = "\n".join(parts)
    return [ChatMessage("system", system), ChatMessage("user", f"# Question\nQ: {query}\nA: ")]


class PluginExtractEntity(StagePlugin):
    events = (EventType.QUERY_UNDERSTAND,)
    contract = StageContract(
        reads=(
            "request.chat_model_id",
            "request.knowledge_base_ids",
            "request.knowledge_ids",
            "request.query",
            "request.search_targets",
            "state.entity",
            "state.intent",
            "state.rewrite_query",
        ),
        writes=("state.diagnostics.extract_entity", "state.entity", "state.entity_kb_ids", "state.entity_knowledge"),
        params=("entity_extract_max_tokens", "entity_extract_temperature"),
        kb=("metadata",),
    )

    def __init__(self, services: Services, offline: OfflineEntityExtractor | None = None) -> None:
        super().__init__(services)
        self.offline = offline or OfflineEntityExtractor()

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        state = chat.state
        if self.services.graph is None or self.services.workspace is None:
            return await next()
        if not needs_kb_retrieval(state.intent):
            return await next()
        diag = EntityExtractionDiagnostics()
        state.diagnostics["extract_entity"] = diag
        try:
            kb_ids, knowledge = self._scope(chat)
        except Exception as exc:
            log.warning("extract_entity: cannot resolve the knowledge scope: %s", exc)
            diag["error"] = f"scope: {exc}"
            return await next()
        kbs = self.services.workspace.store.get_kbs(kb_ids)
        enabled = [k for k in kb_ids if k in kbs and graph_enabled(kbs[k])]
        diag["entity_kb_ids"] = enabled
        if not enabled:
            diag["skipped"] = "no knowledge base in scope has graph extraction enabled"
            return await next()
        state.entity_kb_ids = enabled
        state.entity_knowledge = {kid: kb for kid, kb in knowledge.items() if kb in enabled}
        query = state.rewrite_query.strip() or chat.request.query.strip()
        try:
            state.entity = await self._extract(chat, query, diag)
        except Exception as exc:  # any failure: no entities, the stage goes on
            log.warning("extract_entity failed: %s", exc)
            diag["error"] = f"{type(exc).__name__}: {exc}"
            state.entity = []
        diag["entity"] = list(state.entity)
        return await next()

    def _scope(self, chat: ChatManage) -> tuple[list[str], dict[str, str]]:
        """KB ids of the turn (KBs, whole-KB targets, KBs of the documents in scope) and the
        document → KB map of document-scoped targets and knowledge ids."""
        req = chat.request
        kb_ids: list[str] = [k for k in req.knowledge_base_ids if k]
        knowledge: dict[str, str] = {}
        for t in req.search_targets:
            if t is None or not t.knowledge_base_id:
                continue
            if t.type == "knowledge" and t.knowledge_ids:
                for kid in t.knowledge_ids:
                    knowledge.setdefault(kid, t.knowledge_base_id)
            elif t.type == "knowledge_base":
                kb_ids.append(t.knowledge_base_id)
        loose = [k for k in req.knowledge_ids if k and k not in knowledge]
        ws = self.services.workspace
        if loose and ws is not None:
            for kid, doc in ws.store.get_knowledge(loose).items():
                knowledge[kid] = doc.knowledge_base_id
        kb_ids.extend(knowledge.values())
        return list(dict.fromkeys(kb_ids)), knowledge

    async def _extract(self, chat: ChatManage, query: str, diag: EntityExtractionDiagnostics) -> list[str]:
        if not query:
            return []
        model = None
        if chat.request.chat_model_id:
            try:
                model = self.services.get_chat_model(chat.request.chat_model_id)
            except Exception as exc:
                diag["model_error"] = str(exc)
        if model is None or not getattr(model, "follows_instructions", True):
            diag["extractor"] = "offline"
            return self.offline.extract_query(query)
        diag["extractor"] = getattr(model, "model_id", "chat")
        prompts = self.services.prompts
        if prompts is None:
            raise RuntimeError("no prompt templates configured")
        tpl = prompts.get(EXTRACT_ENTITY_TEMPLATE_ID)
        messages = build_extract_entity_messages(tpl.content, list(tpl.extra.get("examples") or []), query)
        options = ChatOptions(
            temperature=chat.request.params.entity_extract_temperature,
            max_completion_tokens=chat.request.params.entity_extract_max_tokens,
            thinking=False,
        )
        resp = await model.chat(messages, options)
        diag["raw"] = resp.content
        return parse_graph_reply(resp.content).node_names()
