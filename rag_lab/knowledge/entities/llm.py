"""Entities through a chat model: the graph-extraction reply parser (§4.3.7 step 5) and
:class:`LLMGraphExtractor`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rag_lab.knowledge.graph import (
    GraphData,
    GraphNode,
    GraphRelation,
    normalize_entity_name,
)
from rag_lab.knowledge.graph_data import merge_nodes, merge_relations

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.models.base import ChatModel
    from rag_lab.prompts.templates import PromptTemplates


# -- reply parsing (§4.3.7 step 5) ------------------------------------------------------------
class GraphParseError(ValueError):
    """No JSON entity list could be read from a model reply."""


_FENCE = re.compile(r"```([^\n`]*)\n?(.*?)```", re.DOTALL)


def extract_json_block(text: str) -> str:
    """The part of a reply that should hold the JSON (§4.3.7 5.1): among the fenced blocks, the
    first tagged ``json`` or untagged; else the first fence of any tag; with no complete fence,
    what follows an unclosed opening fence; else the whole text."""
    fences = [(m.group(1).strip().lower(), m.group(2)) for m in _FENCE.finditer(text)]
    if fences:
        candidates = [body for tag, body in fences if tag in ("json", "")]
        return (candidates[0] if candidates else fences[0][1]).strip()
    start = text.find("```")
    if start != -1:
        rest = text[start + 3 :]
        nl = rest.find("\n")
        return (rest[nl + 1 :] if nl != -1 else "").strip()
    return text.strip()


def first_balanced_json(text: str) -> str | None:
    """The first ``{…}`` or ``[…]`` (whichever opens first) whose brackets balance, ignoring
    brackets inside JSON strings; when an opener never balances, the next opener is tried."""
    pos = 0
    while True:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i != -1]
        if not starts:
            return None
        start = min(starts)
        end = _balanced_end(text, start)
        if end is not None:
            return text[start : end + 1]
        pos = start + 1


def _balanced_end(text: str, start: int) -> int | None:
    closing = {"{": "}", "[": "]"}
    stack: list[str] = []
    in_str = esc = False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c in closing:
            stack.append(closing[c])
        elif c in "}]":
            if not stack or stack.pop() != c:
                return None
            if not stack:
                return i
    return None


def _decode(block: str) -> object:
    try:
        return json.loads(block)
    except ValueError:
        pass
    pos = 0
    while True:
        found = first_balanced_json(block[pos:])
        if found is None:
            raise GraphParseError(f"no JSON list or object in the reply: {block[:200]!r}")
        try:
            return json.loads(found)
        except ValueError:
            pos += block[pos:].find(found) + 1


def _text(item: dict[str, object], keys: Sequence[str]) -> str:
    for k in keys:
        v = item.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return ""


def parse_graph_reply(text: str) -> GraphData:
    """Nodes and relations from a model reply (§4.3.7 step 5).

    A dict counts as a list of one item. Items with ``entity1`` and ``entity2`` (or ``source``
    and ``target``) become relations (``relation``, numeric ``strength``, ``description``); items
    with ``entity`` (or ``name`` / ``title``) become nodes (``type``, ``description``,
    ``entity_attributes``); a bare string item is a node name. Duplicate names merge,
    self-relations are dropped and relation endpoints that are not nodes become nodes.
    Raises :class:`GraphParseError` when no JSON can be decoded."""
    if not isinstance(text, str) or not text.strip():
        raise GraphParseError("empty reply")
    data = _decode(extract_json_block(text))
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise GraphParseError(f"expected a JSON list of entities, got {type(data).__name__}")
    nodes: list[GraphNode] = []
    relations: list[GraphRelation] = []
    for item in data:
        if isinstance(item, str):
            if item.strip():
                nodes.append(GraphNode(item.strip()))
            continue
        if not isinstance(item, dict):
            continue
        a, b = _text(item, ("entity1", "source")), _text(item, ("entity2", "target"))
        if a and b:
            strength = item.get("strength", 1.0)
            if isinstance(strength, bool) or not isinstance(strength, (int, float)):
                strength = 1.0
            relations.append(
                GraphRelation(
                    a,
                    b,
                    _text(item, ("relation", "relationship", "type")) or "related_to",
                    float(strength),
                    description=_text(item, ("description",)),
                )
            )
            continue
        name = _text(item, ("entity", "name", "title"))
        if name:
            attrs = item.get("entity_attributes", item.get("attributes"))
            attributes: dict[str, object] = {}
            if isinstance(attrs, list):
                attributes["entity_attributes"] = [str(x) for x in attrs if isinstance(x, (str, int, float))]
            elif isinstance(attrs, dict):
                attributes.update(attrs)
            nodes.append(
                GraphNode(
                    name,
                    _text(item, ("type", "entity_type", "kind")),
                    _text(item, ("description",)),
                    attributes=attributes,
                )
            )
    relations = merge_relations(relations)
    known = {normalize_entity_name(n.name) for n in nodes}
    for r in relations:
        for end in (r.source, r.target):
            if normalize_entity_name(end) not in known:
                known.add(normalize_entity_name(end))
                nodes.append(GraphNode(end))
    return GraphData(merge_nodes(nodes), relations)


# -- LLM extractor ----------------------------------------------------------------------------
#: the ``graph_extraction.yaml`` template used by :class:`LLMGraphExtractor`
GRAPH_EXTRACTION_TEMPLATE_ID = "default_extract_graph"


@runtime_checkable
class EntityExtractor(Protocol):
    async def aextract(self, text: str) -> GraphData: ...


class LLMGraphExtractor:
    """Entities and relations of a text through a chat model and the graph-extraction template
    (``{{language}}`` in the system text, ``{{text}}`` in the user text)."""

    def __init__(
        self,
        model: ChatModel,
        prompts: PromptTemplates | None = None,
        template_id: str = GRAPH_EXTRACTION_TEMPLATE_ID,
        language: str = "English",
        temperature: float = 0.3,
        max_tokens: int = 4096,
    ) -> None:
        from rag_lab.prompts.templates import PromptTemplates

        if not getattr(model, "follows_instructions", True):
            raise ValueError(
                f"{getattr(model, 'model_id', model)!r} cannot follow instructions; use OfflineEntityExtractor"
            )
        self.model = model
        tpl = (prompts or PromptTemplates()).get(template_id)
        self.system, self.user = tpl.content, tpl.user or "{{text}}"
        self.language = language
        self.temperature = temperature
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"LLMGraphExtractor({getattr(self.model, 'model_id', self.model)!r})"

    async def aextract(self, text: str) -> GraphData:
        from rag_lab.models.base import ChatMessage, ChatOptions
        from rag_lab.prompts.templates import render_prompt_placeholders

        values = {"language": self.language, "text": text}
        messages = [
            ChatMessage("system", render_prompt_placeholders(self.system, values)),
            ChatMessage("user", render_prompt_placeholders(self.user, values)),
        ]
        options = ChatOptions(temperature=self.temperature, max_completion_tokens=self.max_tokens, thinking=False)
        resp = await self.model.chat(messages, options)
        return parse_graph_reply(resp.content)
