"""JSON schemas that a reply of bounded length always completes (``response_format: json_schema``).

A server that constrains decoding to a schema (llama-server, vLLM) still lets a small model loop
inside a string or an array until the token limit, and a reply cut there is not JSON. Bounding
every string (``maxLength``) and every array (``maxItems``) so that the largest instance fits the
reply's token budget makes the grammar close the object in time: once a string holds ``maxLength``
characters the only token the grammar allows is its closing quote.

:func:`bounded_schema` does this for any JSON schema (a pydantic model's, with ``$ref``\\ s
inlined). The budget assumes the worst case of one character per token (a token never holds less
than one character of ASCII text), so the bound holds whatever the model repeats.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["bounded_schema", "inline_refs", "json_schema_format", "string_budget"]

#: tokens counted for each property of an object instance: its key, quotes, colon and comma
KEY_TOKENS = 4
#: tokens counted for a number, boolean or null value
SCALAR_TOKENS = 2
#: tokens kept free for the outer braces and the end of the reply
SLACK_TOKENS = 8


def inline_refs(schema: Mapping[str, Any]) -> dict[str, object]:
    """``schema`` with every local ``{"$ref": "#/$defs/X"}`` replaced by a copy of the definition
    and ``$defs`` dropped. A recursive definition raises ``ValueError`` (no bounded instance)."""
    defs = dict(schema.get("$defs") or schema.get("definitions") or {})

    def walk(node: object, seen: tuple[str, ...]) -> object:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
                name = ref.rsplit("/", 1)[-1]
                if name in seen:
                    raise ValueError(f"JSON schema: recursive definition {name!r} has no bounded instance")
                if name not in defs:
                    raise ValueError(f"JSON schema: $ref {ref!r} names no definition")
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged, (*seen, name))
            return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    out = walk(dict(schema), ())
    assert isinstance(out, dict)
    return out


def _types(node: Mapping[str, object]) -> set[str]:
    """The node's ``type`` names, plus ``enum`` when its values are listed (a bounded choice)."""
    t = node.get("type")
    out = {t} if isinstance(t, str) else {str(x) for x in t} if isinstance(t, list) else set()
    if "enum" in node or "const" in node:
        out.add("enum")
    return out


def _count(node: object, mult: int, max_items: int, acc: list[int]) -> None:
    """Add to ``acc = [string slots, fixed tokens]`` what ``node`` costs ``mult`` times."""
    if not isinstance(node, Mapping):
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key) or []:
            _count(sub, mult, max_items, acc)
    types = _types(node)
    if "string" in types and "enum" not in types and "maxLength" not in node:
        acc[0] += mult
    elif "string" in types and "maxLength" in node:
        acc[1] += mult * (int(node["maxLength"]) + 2)
    if "enum" in types:
        acc[1] += mult * max((len(str(v)) + 2 for v in node.get("enum") or [node.get("const")]), default=2)
    if types & {"integer", "number", "boolean", "null"}:
        acc[1] += mult * SCALAR_TOKENS
    if "object" in types or "properties" in node:
        for sub in (node.get("properties") or {}).values():
            acc[1] += mult * KEY_TOKENS
            _count(sub, mult, max_items, acc)
    if "array" in types or "items" in node:
        n = int(node.get("maxItems", max_items))
        _count(node.get("items"), mult * n, max_items, acc)


def string_budget(schema: Mapping[str, object], max_tokens: int, max_items: int) -> int:
    """The ``maxLength`` each unbounded string of ``schema`` can have so that its largest
    instance (every array at ``max_items`` or its own ``maxItems``) fits ``max_tokens``."""
    acc = [0, SLACK_TOKENS]
    _count(schema, 1, max_items, acc)
    slots, fixed = acc
    if slots == 0:
        return 0
    return max(0, (max_tokens - fixed) // slots - 2)  # each string's two quotes


def bounded_schema(
    schema: Mapping[str, object], max_tokens: int, *, max_items: int = 8, max_length: int = 500, min_length: int = 16
) -> dict[str, object]:
    """A copy of ``schema`` (refs inlined) whose every array has ``maxItems`` and every free
    string ``maxLength``, so that its largest instance fits ``max_tokens``: arrays hold up to
    ``max_items`` items (fewer when the budget would leave strings under ``min_length``
    characters), strings the :func:`string_budget` for that, capped at ``max_length``. A bound
    the schema already has is kept. Objects get ``additionalProperties: false``. A budget too small
    even for one item per array raises ``ValueError`` naming the tokens needed."""
    if max_tokens < 1 or max_items < 1:
        raise ValueError(f"max_tokens and max_items must be >= 1, got {max_tokens} and {max_items}")
    out = inline_refs(copy.deepcopy(dict(schema)))
    items, length = max_items, min(max_length, string_budget(out, max_tokens, max_items))
    while length < min_length and items > 1 and string_budget(out, 10**9, items) > 0:
        items -= 1
        length = min(max_length, string_budget(out, max_tokens, items))
    if length < min_length and string_budget(out, 10**9, items) > 0:
        slots = _slots(out, items)
        need = max_tokens + (min_length - length) * slots
        raise ValueError(
            f"a reply of {max_tokens} tokens cannot hold this schema with strings of {min_length} characters "
            f"and arrays of 1 item; give the call at least {need} tokens"
        )

    def walk(node: object) -> object:
        if isinstance(node, dict):
            node = {k: walk(v) for k, v in node.items()}
            types = _types(node)
            if "string" in types and "enum" not in types and "maxLength" not in node:
                node["maxLength"] = length
            if ("array" in types or "items" in node) and "maxItems" not in node:
                node["maxItems"] = items
            if ("object" in types or "properties" in node) and "additionalProperties" not in node:
                node["additionalProperties"] = False
            return node
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    bounded = walk(out)
    assert isinstance(bounded, dict)
    return bounded


def _slots(schema: Mapping[str, object], max_items: int) -> int:
    acc = [0, 0]
    _count(schema, 1, max_items, acc)
    return acc[0]


def json_schema_format(name: str, schema: Mapping[str, object]) -> dict[str, object]:
    """The OpenAI ``response_format`` asking for ``schema`` (strict)."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": dict(schema)}}
