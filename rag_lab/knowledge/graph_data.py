"""The knowledge graph's data: names normalised and matched (exact, or partial on whole words /
Han runes, see :mod:`rag_lab.knowledge.graph`), namespaces, nodes, relations, and how nodes and
relations with the same key merge (chunk ids united, strengths added, attributes completed)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: shortest non-Han name that may match part of another name (whole words only)
PARTIAL_MIN_RUNES = 3
#: shortest name containing Han characters that may match part of another name
PARTIAL_MIN_RUNES_HAN = 2

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
_NON_WORD = re.compile(r"[\W_]+")


class GraphError(RuntimeError):
    """The graph file cannot be opened, or an argument is invalid (the message names it)."""


def normalize_entity_name(name: str) -> str:
    """NFKC, case-folded, possessive ``'s`` removed, every run of non-alphanumeric characters
    turned into one space, trimmed. ``"  The  Queen's-Gambit "`` → ``"the queen gambit"``."""
    if not isinstance(name, str):
        return ""
    s = unicodedata.normalize("NFKC", name).casefold()
    s = _POSSESSIVE.sub("", s)
    return _NON_WORD.sub(" ", s).strip()


def match_score(query_norm: str, node_norm: str) -> float:
    """Score of a normalised query name against a normalised node name; 0.0 = no match (the rule
    is in the module docstring)."""
    if not query_norm or not node_norm:
        return 0.0
    if query_norm == node_norm:
        return 1.0
    short, long_ = (query_norm, node_norm) if len(query_norm) <= len(node_norm) else (node_norm, query_norm)
    if _HAN.search(short):
        if len(short) >= PARTIAL_MIN_RUNES_HAN and short in long_:
            return len(short) / len(long_)
        return 0.0
    if len(short) >= PARTIAL_MIN_RUNES and f" {short} " in f" {long_} ":
        return len(short) / len(long_)
    return 0.0


@dataclass(frozen=True, slots=True)
class NameSpace:
    """A KB's graph, or one document's part of it (``knowledge``)."""

    knowledge_base: str
    knowledge: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.knowledge_base, str) or not self.knowledge_base:
            raise GraphError(f"NameSpace.knowledge_base={self.knowledge_base!r} must be a non-empty string")
        if not isinstance(self.knowledge, str):
            raise GraphError(f"NameSpace.knowledge={self.knowledge!r} must be a string")


@dataclass(slots=True)
class GraphNode:
    name: str
    kind: str = ""
    description: str = ""
    chunk_ids: list[str] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)
    knowledge_base_id: str = ""
    knowledge_id: str = ""
    #: match score of the lookup that returned this node (1.0 exact), 0.0 when not from a lookup
    score: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "chunk_ids": list(self.chunk_ids),
            "attributes": json.loads(json.dumps(self.attributes)),
            "knowledge_base_id": self.knowledge_base_id,
            "knowledge_id": self.knowledge_id,
            "score": self.score,
        }


@dataclass(slots=True)
class GraphRelation:
    source: str
    target: str
    relation: str = "related_to"
    strength: float = 1.0
    chunk_ids: list[str] = field(default_factory=list)
    description: str = ""
    knowledge_base_id: str = ""
    knowledge_id: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "target": self.target,
            "relation": self.relation,
            "strength": self.strength,
            "chunk_ids": list(self.chunk_ids),
            "description": self.description,
            "knowledge_base_id": self.knowledge_base_id,
            "knowledge_id": self.knowledge_id,
        }


@dataclass(slots=True)
class GraphData:
    """Nodes and relations (a lookup result, an extraction, or ``chat.state.graph_result``)."""

    nodes: list[GraphNode] = field(default_factory=list)
    relations: list[GraphRelation] = field(default_factory=list)

    def extend(self, other: GraphData) -> None:
        self.nodes.extend(other.nodes)
        self.relations.extend(other.relations)

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def to_dict(self) -> dict[str, object]:
        return {"nodes": [n.to_dict() for n in self.nodes], "relations": [r.to_dict() for r in self.relations]}


def _union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))


def _merge_attributes(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``a`` completed by ``b``: lists united, ``mentions`` counts added, other keys keep their
    first non-empty value."""
    out = dict(a)
    for k, v in b.items():
        cur = out.get(k)
        if isinstance(cur, list) and isinstance(v, list):
            out[k] = _union_any(cur, v)
        elif k == "mentions" and _is_number(cur) and _is_number(v):
            out[k] = cur + v
        elif cur in (None, "", [], {}):
            out[k] = v
    return out


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _union_any(a: list[object], b: list[object]) -> list[object]:
    out = list(a)
    for x in b:
        if x not in out:
            out.append(x)
    return out


def merge_nodes(nodes: Iterable[GraphNode]) -> list[GraphNode]:
    """Nodes with the same normalised name merged into the first (first spelling kept)."""
    by_key: dict[str, GraphNode] = {}
    for n in nodes:
        key = normalize_entity_name(n.name)
        if not key:
            continue
        cur = by_key.get(key)
        if cur is None:
            by_key[key] = GraphNode(
                n.name.strip(),
                n.kind,
                n.description,
                list(dict.fromkeys(n.chunk_ids)),
                dict(n.attributes),
                n.knowledge_base_id,
                n.knowledge_id,
                n.score,
            )
            continue
        cur.chunk_ids = _union(cur.chunk_ids, n.chunk_ids)
        cur.kind = cur.kind or n.kind
        cur.description = cur.description or n.description
        cur.attributes = _merge_attributes(cur.attributes, n.attributes)
    return list(by_key.values())


def merge_relations(relations: Iterable[GraphRelation]) -> list[GraphRelation]:
    """Relations with the same (normalised source, normalised target, relation) merged: chunk ids
    united, strengths added. Self-relations and relations with a blank endpoint are dropped."""
    by_key: dict[tuple[str, str, str], GraphRelation] = {}
    for r in relations:
        s, t = normalize_entity_name(r.source), normalize_entity_name(r.target)
        if not s or not t or s == t:
            continue
        key = (s, t, r.relation)
        cur = by_key.get(key)
        if cur is None:
            by_key[key] = GraphRelation(
                r.source.strip(),
                r.target.strip(),
                r.relation,
                float(r.strength),
                list(dict.fromkeys(r.chunk_ids)),
                r.description,
                r.knowledge_base_id,
                r.knowledge_id,
            )
            continue
        cur.chunk_ids = _union(cur.chunk_ids, r.chunk_ids)
        cur.strength += float(r.strength)
        cur.description = cur.description or r.description
    return list(by_key.values())
