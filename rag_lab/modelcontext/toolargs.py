"""Tool-call argument decoding (spec §7.6).

The model writes handles (``c3``, ``d1``, ``b2``, ``w1``, ``res://0001``) in tool-call arguments;
before a tool runs they go back to durable ids. Only JSON string values under keys that are both
in the source-key table and allowed by the tool's policy are touched, and only when the value has
the handle shape; inside SQL-typed arguments only quoted segments are decoded. Known handles are
resolved; unknown ones are kept and reported. The status says what happened overall.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from rag_lab.modelcontext.registry import Registry

#: argument keys that may carry source handles, and the handle space each one expects
SOURCE_KEYS: dict[str, str] = {
    "chunk_id": "c",
    "chunk_ids": "c",
    "knowledge_id": "d",
    "knowledge_ids": "d",
    "document_id": "d",
    "document_ids": "d",
    "kb_id": "b",
    "kb_ids": "b",
    "knowledge_base_id": "b",
    "knowledge_base_ids": "b",
    "url": "w",
    "urls": "w",
}
_HANDLE = re.compile(r"(?i)^[cdbw][1-9][0-9]*$")
_QUOTED = re.compile(r"'((?:[^']|'')*)'|\"((?:[^\"]|\"\")*)\"")


@dataclass
class ToolArgsDecoding:
    arguments: str
    status: str  # "unchanged" | "resolved" | "partially_resolved" | "unresolved"
    resolved: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)


def _decode_handle(value: str, space: str, registry: Registry, out: ToolArgsDecoding) -> str:
    if not _HANDLE.match(value):
        return value
    if value[0].lower() != space:
        out.unresolved.append(value)
        return value
    durable = registry.durable_for_handle(value)
    if not durable:
        out.unresolved.append(value)
        return value
    out.resolved[value] = durable
    return durable


def _decode_sql(sql: str, registry: Registry, out: ToolArgsDecoding) -> str:
    def repl(m: re.Match[str]) -> str:
        quote = "'" if m.group(1) is not None else '"'
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        if _HANDLE.match(inner):
            durable = registry.durable_for_handle(inner)
            if durable:
                out.resolved[inner] = durable
                return quote + durable.replace(quote, quote * 2) + quote
            out.unresolved.append(inner)
        return m.group(0)

    return _QUOTED.sub(repl, sql)


def decode_tool_call_arguments(
    arguments: str,
    registry: Registry,
    allowed_keys: Iterable[str] = (),
    sql_keys: Iterable[str] = (),
) -> ToolArgsDecoding:
    """Resource handles first, then source handles under the allowed keys (and quoted handles
    inside the SQL-typed keys). Invalid JSON is returned as it is, status ``unchanged``."""
    text = registry.restore_resources(arguments)
    out = ToolArgsDecoding(arguments=text, status="unchanged")
    try:
        data = json.loads(text)
    except ValueError:
        return out
    allowed = {k for k in allowed_keys if k in SOURCE_KEYS}
    sql = set(sql_keys)

    def walk(node: object) -> object:
        if isinstance(node, dict):
            new: dict[str, object] = {}
            for k, v in node.items():
                if k in sql and isinstance(v, str):
                    new[k] = _decode_sql(v, registry, out)
                elif k in allowed and isinstance(v, str):
                    new[k] = _decode_handle(v, SOURCE_KEYS[k], registry, out)
                elif k in allowed and isinstance(v, list):
                    new[k] = [
                        _decode_handle(x, SOURCE_KEYS[k], registry, out) if isinstance(x, str) else walk(x) for x in v
                    ]
                else:
                    new[k] = walk(v)
            return new
        if isinstance(node, list):
            return [walk(x) for x in node]
        return node

    decoded = walk(data)
    before = json.loads(arguments) if _is_json(arguments) else None
    if decoded == before and not out.resolved:
        out.status = "unresolved" if out.unresolved else "unchanged"
        return out
    out.arguments = json.dumps(decoded, ensure_ascii=False)
    if out.resolved and out.unresolved:
        out.status = "partially_resolved"
    elif out.resolved or decoded != before:
        out.status = "resolved"
    else:
        out.status = "unresolved"
    return out


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False
