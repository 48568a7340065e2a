"""The request side of the chat server: the ``{"success": false, "error", "field"}`` error, path
id and option checks, who is calling (:func:`authenticate`), size- and depth-limited JSON bodies
that refuse NUL and lone surrogates, the JSON views of sessions and messages, and the OpenAPI
description of ``POST /knowledge-chat``."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from rag_lab.stream.auth import LOCAL_PRINCIPAL, Principal, bearer_token, is_loopback
from rag_lab.stream.server_config import ServerConfig

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import Request

    from rag_lab.session.sqlite_schema import Session
    from rag_lab.session.store import Message

ID_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


#: the OpenAPI description of POST /knowledge-chat (the handler reads and checks the JSON body
#: itself, so FastAPI cannot infer it): the request body and the SSE response
#: the fields POST /knowledge-chat takes; any other is refused (400) rather than ignored
CHAT_BODY_FIELDS = frozenset({"query", "kb", "knowledge_base_ids"})

KNOWLEDGE_CHAT_OPENAPI: dict[str, object] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["query"],
                    "additionalProperties": False,
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "the question (not blank)"},
                        "kb": {
                            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                            "description": "knowledge base names or ids to search (default: every KB you may see)",
                        },
                        "knowledge_base_ids": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "knowledge base ids or names, a list (a lone string is refused)",
                        },
                    },
                },
                "example": {"query": "When was the lighthouse built?", "kb": "demo"},
            }
        },
    },
    "responses": {
        "200": {
            "description": "the answer as Server-Sent Events (agent_query, progress, references, answer deltas, complete)",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        "400": {
            "description": "bad body (missing or blank query, unknown knowledge base, a field it does not take, …)"
        },
    },
}


class ApiError(Exception):
    """A 4xx/5xx answer ``{"success": false, "error": ..., "field": ...}``."""

    def __init__(self, status: int, message: str, field: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers or {}

    def body(self) -> dict[str, object]:
        out: dict[str, object] = {"success": False, "error": self.message}
        if self.field:
            out["field"] = self.field
        return out


def _check_id(value: str, name: str) -> str:
    if not ID_PATTERN.match(value or ""):
        raise ApiError(400, f"{name}: expected 1-128 characters from A-Z a-z 0-9 _ . -, got {value!r}", name)
    return value


def _query_int(request: Request, name: str, default: int, hi: int) -> int:
    """Query parameter ``name`` as an integer in ``[1, hi]`` (``default`` when absent), or a 400
    naming the parameter: ``page=10**30`` must not reach SQLite (whose integers are 64-bit)."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 12 and 1 <= int(text) <= hi):
        raise ApiError(400, f"{name}: expected an integer in [1, {hi}], got {raw!r:.40}", name)
    return int(text)


def _check_resource_urls(request: Request) -> None:
    """§8.6: ``handle`` (default) passes references through; ``public`` needs a URL signer,
    which this server does not have, so it is refused rather than silently ignored."""
    mode = request.query_params.get("resource_urls", "handle") or "handle"
    if mode == "public":
        raise ApiError(400, "resource_urls: 'public' is not supported by this server; use 'handle'", "resource_urls")
    if mode != "handle":
        raise ApiError(400, f"resource_urls: expected 'handle' or 'public', got {mode!r}", "resource_urls")


def authenticate(request: Request, config: ServerConfig) -> Principal:
    """The caller: the principal of the bearer key, or the local user of a keyless server
    (loopback peers only). 401 otherwise; the key itself is never logged nor echoed."""
    challenge = {"WWW-Authenticate": 'Bearer realm="rag-lab"'}
    sent = request.headers.getlist("authorization")
    if len(sent) > 1:  # which one would count is ambiguous between proxies and servers: neither
        raise ApiError(400, f"authorization: send one Authorization header, got {len(sent)}", "authorization")
    if config.keyless:
        peer = request.client.host if request.client else ""
        if not is_loopback(peer):
            raise ApiError(401, "this server has no API keys and only answers loopback clients", "authorization")
        return LOCAL_PRINCIPAL
    token = bearer_token(request.headers.get("authorization"))
    if token is None:
        raise ApiError(
            401, "authentication required: send 'Authorization: Bearer <API key>'", "authorization", challenge
        )
    principal = config.keys.authenticate(token)
    if principal is None:
        raise ApiError(401, "invalid API key", "authorization", challenge)
    return principal


def owns(session: Session, principal: Principal) -> bool:
    return (session.user_id, int(session.tenant_id or 0)) == (principal.user_id, principal.tenant_id)


def session_dict(session: Session) -> dict[str, object]:
    return {
        "id": session.id,
        "title": session.title,
        "description": session.description,
        "is_pinned": session.is_pinned,
        "parent_session_id": session.parent_session_id,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
    }


def message_dict(message: Message) -> dict[str, object]:
    return {
        "id": message.id,
        "request_id": message.request_id,
        "role": message.role,
        "content": message.content,
        "is_completed": message.is_completed,
        "is_fallback": message.is_fallback,
        "knowledge_references": [r.to_dict() for r in message.knowledge_references],
        "created_at": message.created_at,
    }


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit`` bytes
    (from ``Content-Length`` before anything is read, else while streaming it)."""
    declared = request.headers.get("content-length")
    too_big = ApiError(
        413, f"request body is larger than {limit} bytes (server.max_body_bytes); send a shorter request", "body"
    )
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_big
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise too_big
    return bytes(buf)


def _depth(value: object) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in v)
    return deepest


_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def _bad_text(value: object, path: str = "body") -> tuple[str, str] | None:
    """(field path, description) of the first string (key or value) holding NUL or a lone
    UTF-16 surrogate, which no later stage could store or encode; None when clean."""
    stack = [(value, path)]
    while stack:
        v, where = stack.pop()
        if isinstance(v, str):
            m = _BAD_CHARS.search(v)
            if m:
                ch = m.group()
                what = "a NUL character" if ch == "\x00" else f"a lone surrogate U+{ord(ch):04X}"
                return where, f"{what} at position {m.start()}"
        elif isinstance(v, dict):
            for k, x in v.items():
                stack.append((k, f"{where} key"))
                stack.append((x, k if where == "body" else f"{where}.{k}"))
        elif isinstance(v, list):
            stack.extend((x, f"{where}[{i}]") for i, x in enumerate(v))
    return None


async def _json_object(request: Request, example: str, config: ServerConfig | None = None) -> dict[str, object]:
    config = config or ServerConfig()
    raw = await read_body(request, config.max_body_bytes)
    if not raw.strip():
        raise ApiError(400, f"request body is empty; expected a JSON object such as {example}", "body")
    try:
        body = json.loads(raw)
    except RecursionError:
        raise ApiError(400, f"request body is nested deeper than {config.max_json_depth} levels", "body") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(
            400, f"request body is not valid JSON ({exc}); expected an object such as {example}", "body"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(400, f"request body must be a JSON object such as {example}, got {type(body).__name__}", "body")
    if _depth(body) > config.max_json_depth:
        raise ApiError(
            400, f"request body is nested deeper than {config.max_json_depth} levels (server.max_json_depth)", "body"
        )
    bad = _bad_text(body)
    if bad is not None:
        field = re.split(r"[ .\[]", bad[0], maxsplit=1)[0]  # the top-level field
        raise ApiError(400, f"{bad[0]}: contains {bad[1]}; send valid Unicode text", field)
    return body


def _string_list(body: dict[str, object], name: str, one_string: bool = False) -> list[str]:
    """``body[name]`` as a list of non-empty strings (``[]`` when absent); a lone string is one
    item only where the field takes one (``one_string``), else a 400 naming the field."""
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        if not one_string:
            raise ApiError(400, f"{name}: expected a list of strings, got the string {value!r:.80}", name)
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ApiError(400, f"{name}: expected a list of non-empty strings, got {value!r}", name)
    return [v.strip() for v in value]
