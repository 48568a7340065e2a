"""The HTTP chat server: ask with a live SSE answer, resume, stop (spec §3.1, §8.3–§8.5, A.2).

``create_app(lab)`` returns a FastAPI app with

* ``POST /knowledge-chat/{session_id}`` ``{query, knowledge_base_ids? | kb?}``: starts the
  pipeline as a background task that belongs to the server, not to the connection, and streams
  the message's event log as SSE, polling the StreamManager every 100 ms from offset 0;
* ``GET /sessions/continue-stream/{session_id}?message_id=…``: replays the log from offset 0 with
  consecutive deltas coalesced (Appendix A.2), then follows it until ``complete`` / ``stop``;
* ``POST /sessions/{session_id}/stop`` ``{message_id}``: owner only; cancels the generation and
  keeps the partial answer.

* ``POST /sessions`` creates a session with a server-chosen id; ``GET /sessions`` lists the
  caller's sessions; ``GET /sessions/{session_id}`` (with its messages) and ``DELETE
  /sessions/{session_id}`` read and delete one.

Nothing writes to a socket but the readers of the log, so a client may drop and come back (to
any replica, with the Redis backend) and the answer keeps being generated.

Who is calling (see :mod:`rag_lab.stream.auth` and docs/security.md): with API keys configured,
every route but a bare ``GET /health`` needs ``Authorization: Bearer <key>`` (401 otherwise), and
the key names the user and tenant. Without keys the server is keyless: one local user, only from
loopback peers. Sessions (and so their messages and streams) belong to the (user, tenant) stored
with them in SQLite; KBs belong to a tenant. Whatever is not the caller's answers exactly like
what does not exist (404 for sessions and messages, 400 "unknown knowledge base" for KBs).

Why a plain ``StreamingResponse`` and not sse-starlette: the spec fixes the frame bytes
(``event:message\\ndata:<json>\\n\\n``, no space after the colons, Go's ``\\u003c`` escapes), which
is a two-line function here, and Starlette already cancels the generator when the client
disconnects. sse-starlette's extras (pings, ``retry:``) are not in the protocol.

When a follower stops without ``complete`` (our choice; the spec only ends on complete / stop /
disconnect, Appendix B.15): a follower of a generation running in this process ends once that
task has finished and a read after its end found nothing new (so an ``error`` without
``complete`` ends the stream as soon as the task is over, never hangs). A follower of a
generation it cannot see (another replica, or a server restarted since) ends ``error_grace_s``
after an ``error`` event with nothing newer, or after ``idle_timeout_s`` without any event.

This module holds the routes (:func:`create_app`); the rest of the server is split by
responsibility and re-exported here: :mod:`rag_lab.stream.server_sse` (frames, headers, SSE
timings), :mod:`rag_lab.stream.server_http` (errors, id checks, authentication, JSON bodies) and
:mod:`rag_lab.stream.server_service` (running generations, following logs, stop; itself assembled
from ``server_state``, ``server_generate``, ``server_lifecycle`` and ``server_follow``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request  # this module is the HTTP layer: import it only to serve
from fastapi.responses import JSONResponse, StreamingResponse

from rag_lab.session.sqlite_schema import MAX_PAGE, MAX_PAGE_SIZE
from rag_lab.stream.auth import Principal, bearer_token
from rag_lab.stream.coalesce import coalesce_events
from rag_lab.stream.manager import StreamDirectory, StreamManager
from rag_lab.stream.recovery import HOST as RECOVERY_HOST
from rag_lab.stream.server_config import ServerConfig
from rag_lab.stream.server_http import (
    CHAT_BODY_FIELDS,
    ID_PATTERN,
    KNOWLEDGE_CHAT_OPENAPI,
    ApiError,
    _check_id,
    _check_resource_urls,
    _json_object,
    _query_int,
    _string_list,
    authenticate,
    message_dict,
    owns,
    read_body,
    session_dict,
)
from rag_lab.stream.server_service import Generation, StreamService
from rag_lab.stream.server_sse import (
    SSE_HEADERS,
    SSE_POLL_INTERVAL_S,
    STOP_WATCH_INTERVAL_S,
    STOP_WATCH_MAX_S,
    STOPPED_CONTENT,
    StreamServerSettings,
    build_stream_response,
    encode_json,
    sse_frame,
)

if TYPE_CHECKING:
    from rag_lab.lab.lab import Lab

__all__ = [
    "ID_PATTERN",
    "KNOWLEDGE_CHAT_OPENAPI",
    "SSE_HEADERS",
    "SSE_POLL_INTERVAL_S",
    "STOPPED_CONTENT",
    "STOP_WATCH_INTERVAL_S",
    "STOP_WATCH_MAX_S",
    "ApiError",
    "Generation",
    "StreamServerSettings",
    "StreamService",
    "authenticate",
    "build_stream_response",
    "create_app",
    "encode_json",
    "message_dict",
    "owns",
    "read_body",
    "session_dict",
    "sse_frame",
]


def create_app(
    lab: Lab,
    *,
    manager: StreamManager | None = None,
    directory: StreamDirectory | None = None,
    settings: StreamServerSettings | None = None,
    server: ServerConfig | Mapping[str, object] | None = None,
) -> FastAPI:
    """The FastAPI app serving ``lab``. ``manager`` replaces ``lab.stream_manager`` when given;
    the directory defaults to the one that lives beside the manager (Redis next to Redis).
    ``server`` (keys and limits) defaults to the lab config's ``server`` section plus the
    ``RAG_LAB_API_KEYS`` environment variable."""
    from rag_lab.stream.appender import OrderedAppender
    from rag_lab.stream.factory import build_stream_directory
    from rag_lab.stream.manager import MemoryStreamManager

    if manager is not None:
        lab.stream_manager = manager
    manager = lab.stream_manager
    inner = manager.inner if isinstance(manager, OrderedAppender) else manager
    if not isinstance(manager, (MemoryStreamManager, OrderedAppender)):
        # a remote log (Redis): the pipeline appends from the event loop, so writes go to a
        # background thread in order (rag_lab.stream.appender) instead of blocking the loop
        manager = lab.stream_manager = OrderedAppender(manager)
    if not isinstance(server, ServerConfig):
        server = ServerConfig.from_config(server if server is not None else (lab.config.get("server") or {}))
    service = StreamService(
        lab,
        manager,
        directory or build_stream_directory(inner),
        settings or StreamServerSettings.from_params(lab.params),
        server,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.startup()
        yield
        await service.shutdown()

    app = FastAPI(title="rag-lab", lifespan=lifespan)
    app.state.service = service

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    def caller(request: Request) -> Principal:
        return authenticate(request, service.config)

    def stream(frames: AsyncIterator[bytes], session_id: str, message_id: str) -> StreamingResponse:
        headers = dict(SSE_HEADERS, **{"X-Session-ID": session_id, "X-Message-ID": message_id})
        return StreamingResponse(frames, headers=headers)

    @app.get("/health")
    async def health(request: Request) -> dict[str, object]:
        """``{"status": "ok"}`` for anyone (load balancers); the details for authenticated callers."""
        out: dict[str, object] = {"status": "ok"}
        if service.config.keyless or bearer_token(request.headers.get("authorization")):
            caller(request)
            out["stream_manager"] = type(inner).__name__
            out["running"] = sum(1 for g in service.generations.values() if not g.finished())
        return out

    @app.post("/sessions")
    async def create_session(request: Request) -> JSONResponse:
        principal = caller(request)
        has_body = (request.headers.get("content-length") or "0") != "0" or "chunked" in (
            request.headers.get("transfer-encoding") or ""
        )
        body = await _json_object(request, '{"title": "..."}', service.config) if has_body else {}
        title = body.get("title", "")
        if not isinstance(title, str) or len(title) > 200:
            raise ApiError(400, f"title: expected a string of at most 200 characters, got {title!r:.60}", "title")
        session = await service.call(
            lambda: service.sessions.create_session(principal.user_id, tenant_id=principal.tenant_id, title=title)
        )
        return JSONResponse({"success": True, "data": session_dict(session)}, status_code=201)

    @app.get("/sessions")
    async def list_sessions(request: Request) -> dict[str, object]:
        principal = caller(request)
        page = _query_int(request, "page", 1, MAX_PAGE)
        page_size = _query_int(request, "page_size", 20, MAX_PAGE_SIZE)
        got = await service.call(service.sessions.list_sessions, principal.user_id, page, page_size)
        items = [session_dict(x) for x in got.items if owns(x, principal)]
        return {"success": True, "data": items, "total": got.total, "page": got.page, "page_size": got.page_size}

    @app.get("/sessions/{session_id}")
    async def get_session(session_id: str, request: Request) -> dict[str, object]:
        _check_id(session_id, "session_id")
        session = await service.owned_session(session_id, caller(request))
        messages = await service.call(service.sessions.list_messages, session_id)
        return {"success": True, "data": dict(session_dict(session), messages=[message_dict(m) for m in messages])}

    @app.delete("/sessions/{session_id}")
    async def delete_session(session_id: str, request: Request) -> dict[str, object]:
        _check_id(session_id, "session_id")
        await service.owned_session(session_id, caller(request))
        await service.call(service.sessions.delete_session, session_id)
        return {"success": True}

    @app.post("/knowledge-chat/{session_id}", openapi_extra=KNOWLEDGE_CHAT_OPENAPI)
    async def knowledge_chat(session_id: str, request: Request) -> Any:
        _check_id(session_id, "session_id")
        principal = caller(request)
        _check_resource_urls(request)
        body = await _json_object(request, '{"query": "When was the lighthouse built?"}', service.config)
        unknown = sorted(set(body) - CHAT_BODY_FIELDS)
        if unknown:  # e.g. "params": silently ignoring it would answer with other params than asked
            raise ApiError(
                400,
                f"{unknown[0]}: not a field of this endpoint (it takes {', '.join(sorted(CHAT_BODY_FIELDS))}); "
                "per-request params are not accepted: the server answers with the params of its lab config",
                unknown[0],
            )
        if "query" not in body:
            raise ApiError(400, "query: required (the question to answer)", "query")
        query = body["query"]
        if not isinstance(query, str):
            raise ApiError(400, f"query: expected a string, got {type(query).__name__}", "query")
        if not query.strip():
            raise ApiError(400, "query: must not be empty", "query")
        if len(query) > service.config.max_query_chars:
            raise ApiError(
                400,
                f"query: {len(query)} characters is more than {service.config.max_query_chars} "
                "(server.max_query_chars); ask a shorter question",
                "query",
            )
        names = _string_list(body, "knowledge_base_ids") + _string_list(body, "kb", one_string=True)
        kbs = service.resolve_kbs(list(dict.fromkeys(names)), principal)
        await service.session_for_ask(session_id, principal)
        message_id = str(uuid.uuid4())
        rid = (request.headers.get("x-request-id") or "").strip()
        request_id = rid if ID_PATTERN.match(rid) else str(uuid.uuid4())
        await service.call(service.directory.record_message, session_id, message_id, request_id)
        await asyncio.to_thread(
            lambda: service.sessions.begin_generation(
                session_id,
                message_id,
                request_id=request_id,
                user_id=principal.user_id,
                tenant_id=principal.tenant_id,
                query=query,
                host=RECOVERY_HOST,
                pid=os.getpid(),
                instance=service.instance,
            )
        )
        gen = Generation(session_id, message_id, request_id, principal.user_id, query, kbs, principal.tenant_id)
        service.start(gen)
        return stream(service.follow(session_id, message_id, request_id, 0), session_id, message_id)

    @app.get("/sessions/continue-stream/{session_id}")
    async def continue_stream(session_id: str, request: Request) -> Any:
        _check_id(session_id, "session_id")
        message_id = request.query_params.get("message_id", "")
        if not message_id:
            raise ApiError(400, "message_id: required query parameter", "message_id")
        _check_id(message_id, "message_id")
        _check_resource_urls(request)
        await service.owned_session(session_id, caller(request))
        events, next_offset = await service.call(manager.get_events, session_id, message_id, 0)
        if not events:  # the log is gone (memory backend restarted, expiry): replay the saved turn
            from rag_lab.stream.recovery import events_from_message

            saved = await service.call(service.sessions.find_message, session_id, message_id)
            if saved is None:
                raise ApiError(404, "No stream events found", "message_id")
            events, next_offset = events_from_message(session_id, message_id, saved), 0
        request_id = await service.request_id_of(session_id, message_id)
        frames = service.follow(session_id, message_id, request_id, next_offset, coalesce_events(events))
        return stream(frames, session_id, message_id)

    @app.post("/sessions/{session_id}/stop")
    async def stop(session_id: str, request: Request) -> dict[str, object]:
        _check_id(session_id, "session_id")
        principal = caller(request)
        body = await _json_object(request, '{"message_id": "..."}', service.config)
        message_id = body.get("message_id")
        if not isinstance(message_id, str) or not message_id:
            raise ApiError(400, f"message_id: required string, got {message_id!r}", "message_id")
        _check_id(message_id, "message_id")
        await service.owned_session(session_id, principal)
        return await service.stop(session_id, message_id)

    return app
