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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request  # this module is the HTTP layer: import it only to serve
from fastapi.responses import JSONResponse, StreamingResponse

from rag_lab.stream.auth import LOCAL_PRINCIPAL, Principal, bearer_token, is_loopback
from rag_lab.stream.bus import short_id
from rag_lab.stream.coalesce import coalesce_events
from rag_lab.stream.manager import MemoryStreamDirectory, MemoryStreamManager, StreamDirectory, StreamManager
from rag_lab.stream.recovery import HOST as RECOVERY_HOST
from rag_lab.stream.redis_manager import json_default
from rag_lab.stream.server_config import ServerConfig
from rag_lab.types.params import PipelineParams
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent, StreamResponse

log = logging.getLogger(__name__)

#: spec §11.4 defaults, from PipelineParams
_P = PipelineParams.model_fields
SSE_POLL_INTERVAL_S: float = _P["sse_poll_interval_ms"].default / 1000
STOP_WATCH_INTERVAL_S: float = _P["stop_watch_interval_ms"].default / 1000
STOP_WATCH_MAX_S: float = _P["stop_watch_max_s"].default

SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
STOPPED_CONTENT = "Generation stopped by user"
ID_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_TERMINAL = {ResponseType.COMPLETE.value, STOP_RESPONSE_TYPE}


@dataclass
class StreamServerSettings:
    """Timings of the SSE layer. The first three are the spec's; the rest are ours."""

    poll_interval_s: float = SSE_POLL_INTERVAL_S
    stop_watch_interval_s: float = STOP_WATCH_INTERVAL_S
    stop_watch_max_s: float = STOP_WATCH_MAX_S
    #: a follower without a local generation ends this long after an error with nothing newer
    error_grace_s: float = 5.0
    #: a follower without a local generation ends after this long without any new event
    idle_timeout_s: float = 600.0
    #: POST /stop waits this long for a local generation to flush before writing ``stop`` (readers
    #: end on it, so this bounds how long a reader of a stopped message waits)
    stop_wait_s: float = 0.5
    #: running generations refresh their crash-recovery record (and answer so far) this often
    heartbeat_s: float = 1.0
    #: a record of another host whose heartbeat is older than this is finished by this server
    orphan_after_s: float = 15.0
    #: finished generations are forgotten this long after they end (the log keeps their events)
    keep_finished_s: float = 600.0

    @classmethod
    def from_params(cls, params: Any) -> StreamServerSettings:
        """The spec's timings from the lab's PipelineParams."""
        return cls(
            poll_interval_s=params.sse_poll_interval_ms / 1000,
            stop_watch_interval_s=params.stop_watch_interval_ms / 1000,
            stop_watch_max_s=params.stop_watch_max_s,
        )


# -- frames ----------------------------------------------------------------------------------


#: the OpenAPI description of POST /knowledge-chat (the handler reads and checks the JSON body
#: itself, so FastAPI cannot infer it): the request body and the SSE response
KNOWLEDGE_CHAT_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["query"],
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "the question (not blank)"},
                        "kb": {
                            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                            "description": "knowledge base names or ids to search (default: every KB you may see)",
                        },
                        "knowledge_base_ids": {
                            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                            "description": "knowledge base ids (same as kb)",
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
        "400": {"description": "bad body (missing or blank query, unknown knowledge base, …)"},
    },
}


def build_stream_response(event: StreamEvent, request_id: str) -> StreamResponse:
    """A stored event as the SSE payload (§8.3): the request id as ``id``, data copied,
    ``agent_query`` ids and ``references`` lifted; a stored ``stop`` becomes the stop notice."""
    kind = str(event.type)
    if kind == STOP_RESPONSE_TYPE:
        return StreamResponse(id=request_id, response_type=STOP_RESPONSE_TYPE, content=STOPPED_CONTENT, done=True)
    data = dict(event.data or {})
    resp = StreamResponse(id=request_id, response_type=kind, content=event.content, done=event.done, data=data)
    if kind == ResponseType.AGENT_QUERY.value:
        resp.session_id = str(data.get("session_id") or "")
        resp.assistant_message_id = str(data.get("assistant_message_id") or "")
    elif kind == ResponseType.REFERENCES.value:
        resp.knowledge_references = list(data.get("references") or [])
    return resp


def encode_json(obj: Any) -> str:
    """Compact JSON with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as Go's encoder does."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=json_default)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def sse_frame(resp: StreamResponse) -> bytes:
    """``event:message\\ndata:<json>\\n\\n`` (no space after the colons, §8.3)."""
    return f"event:message\ndata:{encode_json(resp.to_dict())}\n\n".encode()


# -- errors ----------------------------------------------------------------------------------


class ApiError(Exception):
    """A 4xx/5xx answer ``{"success": false, "error": ..., "field": ...}``."""

    def __init__(self, status: int, message: str, field: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"success": False, "error": self.message}
        if self.field:
            out["field"] = self.field
        return out


def _check_id(value: str, name: str) -> str:
    if not ID_PATTERN.match(value or ""):
        raise ApiError(400, f"{name}: expected 1-128 characters from A-Z a-z 0-9 _ . -, got {value!r}", name)
    return value


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


def _warm_imports() -> None:
    """Import what the first request would otherwise import on the event loop (the openai
    client's resources take seconds cold, during which no stream, stop or health is served)."""
    import importlib

    for name in ("openai.resources.chat.completions", "openai.resources.embeddings"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def owns(session: Any, principal: Principal) -> bool:
    return (session.user_id, int(session.tenant_id or 0)) == (principal.user_id, principal.tenant_id)


def session_dict(session: Any) -> dict[str, Any]:
    return {
        "id": session.id,
        "title": session.title,
        "description": session.description,
        "is_pinned": session.is_pinned,
        "parent_session_id": session.parent_session_id,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
    }


def message_dict(message: Any) -> dict[str, Any]:
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


def _depth(value: Any) -> int:
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


def _bad_text(value: Any, path: str = "body") -> tuple[str, str] | None:
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


async def _json_object(request: Request, example: str, config: ServerConfig | None = None) -> dict[str, Any]:
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


def _string_list(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ApiError(400, f"{name}: expected a list of non-empty strings, got {value!r}", name)
    return [v.strip() for v in value]


# -- generations -----------------------------------------------------------------------------


@dataclass
class Generation:
    """One answer being generated in this process."""

    session_id: str
    message_id: str
    request_id: str
    user_id: str
    query: str
    kbs: list[str]
    tenant_id: int = 0
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)
    #: the answer so far and the references, saved by the heartbeat for crash recovery
    partial: str = ""
    references: list[dict[str, Any]] = field(default_factory=list)
    task: asyncio.Task | None = None
    stop_requested: bool = False
    stop_written: bool = False
    run: Any = None
    error: str = ""
    finished_at: float = 0.0  # time.monotonic() when the task ended

    def finished(self) -> bool:
        return self.task is not None and self.task.done()


class StreamService:
    """The state behind the endpoints: the lab, the log, the directory, running generations."""

    def __init__(
        self,
        lab: Any,
        manager: StreamManager,
        directory: StreamDirectory,
        settings: StreamServerSettings,
        config: ServerConfig | None = None,
    ) -> None:
        self.lab = lab
        self.manager = manager
        self.directory = directory
        self.settings = settings
        self.config = config or ServerConfig()
        #: the owner of every session (and so of its messages and streams) is stored here
        self.sessions = lab.sessions
        self.generations: dict[tuple[str, str], Generation] = {}
        self.active_followers = 0
        #: this server's identity in the crash-recovery records (rag_lab.stream.recovery)
        self.instance = uuid.uuid4().hex
        self._maintenance: asyncio.Task | None = None
        # the in-memory backends never block; Redis calls go to a worker thread
        self._inline = isinstance(manager, MemoryStreamManager) and isinstance(directory, MemoryStreamDirectory)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._inline:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    # -- crash recovery --------------------------------------------------------------------
    async def startup(self) -> None:
        """Finish what dead servers left in flight, then keep this server's records fresh."""
        from rag_lab.stream.recovery import LIVE_INSTANCES

        LIVE_INSTANCES.add(self.instance)
        await asyncio.to_thread(_warm_imports)
        await self.recover()
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain(), name="stream-maintenance")

    async def recover(self) -> int:
        from rag_lab.stream.recovery import recover_orphans

        try:
            return await asyncio.to_thread(recover_orphans, self.manager, self.sessions, self.settings.orphan_after_s)
        except Exception as exc:
            log.warning("crash recovery failed (retrying later): %s", exc)
            return 0

    async def _maintain(self) -> None:
        sweep_every = max(1, int(5 / max(self.settings.heartbeat_s, 0.01)))
        tick = 0
        while True:
            await asyncio.sleep(self.settings.heartbeat_s)
            tick += 1
            running = {k: (g.partial, list(g.references)) for k, g in self.generations.items() if not g.finished()}
            try:
                if running:
                    await asyncio.to_thread(self.sessions.heartbeat_generations, self.instance, running)
            except Exception as exc:
                log.warning("could not refresh the in-flight records: %s", exc)
            if tick % sweep_every == 0:  # orphans of other hosts / hung processes
                await self.recover()

    def _track(self, gen: Generation) -> Callable[[Any], None]:
        """A bus listener keeping the generation's answer so far and references."""
        from rag_lab.stream.bus import BusEventType
        from rag_lab.types.search_result import SearchResult

        def on_event(ev: Any) -> None:
            if ev.type == BusEventType.FINAL_ANSWER:
                gen.partial += str(ev.data.get("content", ""))
            elif ev.type == BusEventType.REFERENCES:
                gen.references.extend(
                    r.to_dict() if isinstance(r, SearchResult) else dict(r) for r in ev.data.get("references") or []
                )

        return on_event

    # -- generation ----------------------------------------------------------------------
    def start(self, gen: Generation) -> None:
        self._forget_finished()
        self.generations[(gen.session_id, gen.message_id)] = gen
        gen.task = asyncio.get_running_loop().create_task(self._generate(gen), name=f"generate-{gen.message_id}")

    async def _start_title(self, gen: Generation) -> None:
        """§9.2: a first turn gets a title in the background; its ``session_title`` event goes to
        the same stream (models that cannot follow instructions are skipped)."""
        sessions = getattr(self.lab, "sessions", None)
        if sessions is None:
            return
        from rag_lab.session.title import generate_title_async
        from rag_lab.stream.bus import EventBus
        from rag_lab.stream.handler import AgentStreamHandler

        try:
            bus = EventBus()
            AgentStreamHandler(self.manager, gen.session_id, gen.message_id).subscribe(bus)
            generate_title_async(
                sessions,
                gen.session_id,
                gen.query,
                self.lab.chat_model,
                language=self.lab.language,
                bus=bus,
                prompts=self.lab.prompts,
                ledger=getattr(self.lab, "background_ledger", None),
            )
        except Exception as exc:  # a title never blocks an answer
            log.warning("title generation for %s not started: %s", gen.session_id, exc)

    async def _generate(self, gen: Generation) -> None:
        watcher = asyncio.get_running_loop().create_task(self._stop_watcher(gen))
        await self._start_title(gen)
        try:
            gen.run = await self.lab.aask(
                gen.query,
                kb=gen.kbs or None,
                session_id=gen.session_id,
                message_id=gen.message_id,
                cancel_event=gen.cancel_event,
                snapshots=False,
                user_id=gen.user_id,
                tenant_id=gen.tenant_id,
                on_event=self._track(gen),
            )
        except Exception as exc:  # §3.1 step 9.4: reported unless the request was cancelled
            gen.error = str(exc) or type(exc).__name__
            log.exception("generation %s/%s failed", gen.session_id, gen.message_id)
            if not gen.cancel_event.is_set():
                await self._append_quietly(
                    gen,
                    StreamEvent(
                        f"{short_id()}-error",
                        ResponseType.ERROR.value,
                        gen.error,
                        True,
                        data={"stage": "knowledge_qa_execution", "error": gen.error},
                    ),
                )
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if gen.stop_requested and not gen.stop_written:
                gen.stop_written = True
                await self._append_quietly(gen, self.stop_event(gen.session_id, gen.message_id))
            try:  # the turn is saved (or failed): nothing left to recover
                await asyncio.to_thread(self.sessions.end_generation, gen.session_id, gen.message_id)
            except Exception as exc:
                log.warning("could not clear the in-flight record of %s/%s: %s", gen.session_id, gen.message_id, exc)
            gen.finished_at = time.monotonic()

    def _forget_finished(self) -> None:
        """Drop generations that ended more than ``keep_finished_s`` ago (bounded memory)."""
        cutoff = time.monotonic() - self.settings.keep_finished_s
        for key in [k for k, g in self.generations.items() if g.finished() and 0 < g.finished_at < cutoff]:
            del self.generations[key]

    async def _append_quietly(self, gen: Generation, event: StreamEvent) -> None:
        try:
            await self.call(self.manager.append_event, gen.session_id, gen.message_id, event)
        except Exception as exc:
            log.warning("stream %s/%s: could not store a %s event: %s", gen.session_id, gen.message_id, event.type, exc)

    @staticmethod
    def stop_event(session_id: str, message_id: str) -> StreamEvent:
        return StreamEvent(
            f"stop-{time.time_ns()}",
            STOP_RESPONSE_TYPE,
            "",
            True,
            data={"session_id": session_id, "message_id": message_id, "reason": "user_requested"},
        )

    async def _stop_watcher(self, gen: Generation) -> None:
        """§8.5: a stop written by another replica reaches this generation through the log."""
        offset = 0
        deadline = time.monotonic() + self.settings.stop_watch_max_s
        while time.monotonic() < deadline:
            await asyncio.sleep(self.settings.stop_watch_interval_s)
            try:
                events, offset = await self.call(self.manager.get_events, gen.session_id, gen.message_id, offset)
            except Exception as exc:
                log.debug("stop watcher read failed (retrying): %s", exc)
                continue
            for ev in events:
                if ev.type == STOP_RESPONSE_TYPE:
                    gen.stop_requested = gen.stop_written = True
                    gen.cancel_event.set()
                    return
                if ev.type == ResponseType.COMPLETE.value or (ev.type == ResponseType.ERROR.value and ev.done):
                    return

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel what is still running (server exit) and wait a little for it to wind down."""
        from rag_lab.stream.recovery import LIVE_INSTANCES

        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        running = [g for g in self.generations.values() if g.task is not None and not g.task.done()]
        for g in running:
            g.cancel_event.set()
        if running:
            await asyncio.wait([g.task for g in running if g.task is not None], timeout=timeout)
        LIVE_INSTANCES.discard(self.instance)

    # -- reading -------------------------------------------------------------------------
    async def follow(
        self,
        session_id: str,
        message_id: str,
        request_id: str,
        offset: int = 0,
        replay: list[StreamEvent] | None = None,
    ) -> AsyncIterator[bytes]:
        """SSE frames: ``replay`` first, then the log from ``offset`` until a terminal event."""
        self.active_followers += 1
        try:
            s = self.settings
            last_event = time.monotonic()
            error_at: float | None = None
            if replay is not None:  # §8.4: every stored event, then stop if the stream was done
                for ev in replay:
                    yield sse_frame(build_stream_response(ev, request_id))
                    if ev.type == ResponseType.ERROR.value:
                        error_at = time.monotonic()
                if any(ev.type in _TERMINAL for ev in replay):
                    return
            while True:
                gen = self.generations.get((session_id, message_id))
                finished_before = gen is not None and gen.finished()
                try:
                    events, next_offset = await self.call(self.manager.get_events, session_id, message_id, offset)
                except Exception as exc:  # §8.3: log, retry on the next tick
                    log.warning("stream %s/%s: read failed (retrying): %s", session_id, message_id, exc)
                    await asyncio.sleep(s.poll_interval_s)
                    continue
                for ev in events:
                    if ev.type == STOP_RESPONSE_TYPE and gen is not None and not gen.cancel_event.is_set():
                        gen.stop_requested = gen.stop_written = True
                        gen.cancel_event.set()
                    yield sse_frame(build_stream_response(ev, request_id))
                    if ev.type in _TERMINAL:
                        return
                    if ev.type == ResponseType.ERROR.value:
                        error_at = time.monotonic()
                offset = next_offset
                now = time.monotonic()
                if events:
                    last_event = now
                elif finished_before:
                    return  # the generation is over and its log is drained
                elif gen is None and error_at is not None and now - last_event >= s.error_grace_s:
                    return
                elif gen is None and now - last_event >= s.idle_timeout_s:
                    return
                await asyncio.sleep(s.poll_interval_s)
        finally:
            self.active_followers -= 1

    # -- endpoints' logic ----------------------------------------------------------------
    async def owned_session(self, session_id: str, principal: Principal) -> Any:
        """The caller's session from the SQLite store; missing and not-yours are the same 404."""
        from rag_lab.session.sqlite_store import SessionNotFound

        try:
            session = await self.call(self.sessions.get_session, session_id)
        except SessionNotFound:
            session = None
        if session is None or not owns(session, principal):
            raise ApiError(404, "Session not found", "session_id")
        return session

    async def session_for_ask(self, session_id: str, principal: Principal) -> Any:
        """The session an ask goes to: the caller's own, or (when the server creates sessions on
        first use) a new one owned by the caller. Someone else's is 404, like a missing one."""
        from rag_lab.session.sqlite_store import SessionNotFound

        try:
            return await self.owned_session(session_id, principal)
        except ApiError:
            if not self.config.creates_sessions:
                raise
        try:
            await self.call(self.sessions.get_session, session_id)
            raise ApiError(404, "Session not found", "session_id")  # exists, not the caller's
        except SessionNotFound:
            pass
        try:
            await self.call(
                lambda: self.sessions.create_session(
                    principal.user_id, session_id=session_id, tenant_id=principal.tenant_id
                )
            )
        except ValueError:  # created by someone else in between
            pass
        return await self.owned_session(session_id, principal)

    async def request_id_of(self, session_id: str, message_id: str) -> str:
        gen = self.generations.get((session_id, message_id))
        if gen is not None:
            return gen.request_id
        rid = await self.call(self.directory.message_request_id, session_id, message_id)
        return rid or message_id

    def resolve_kbs(self, names: list[str], principal: Principal) -> list[str]:
        """KB ids for names or ids the caller's tenant may search. An unknown KB and another
        tenant's KB get the same 400, which names only what the caller sent."""
        from rag_lab.retrieval.hybrid_search import can_view

        store = self.lab.workspace.store
        out: list[str] = []
        for name in names:
            kb = store.get_kb(name) or store.get_kb_by_name(name)
            if kb is None or not can_view(kb, principal.tenant_id):
                raise ApiError(400, f"knowledge_base_ids: unknown knowledge base {name!r}", "knowledge_base_ids")
            if kb.id not in out:
                out.append(kb.id)
        return out

    async def stop(self, session_id: str, message_id: str) -> dict[str, Any]:
        gen = self.generations.get((session_id, message_id))
        events, _ = await self.call(self.manager.get_events, session_id, message_id, 0)
        if gen is None and not events:
            if await self.call(self.sessions.find_message, session_id, message_id) is not None:
                return {"success": True, "message": "Message already completed"}  # its log is gone
            raise ApiError(404, "Message not found", "message_id")
        kinds = {e.type for e in events}
        if STOP_RESPONSE_TYPE in kinds:
            return {"success": True, "message": "Generation already stopped"}
        if ResponseType.COMPLETE.value in kinds or (gen is not None and gen.finished()):
            return {"success": True, "message": "Message already completed"}
        if gen is None:  # running elsewhere (another replica): its stop watcher reads this
            try:
                await self.call(
                    self.manager.append_event, session_id, message_id, self.stop_event(session_id, message_id)
                )
            except Exception as exc:
                log.warning("could not write a stop event: %s", exc)
                raise ApiError(500, "Failed to write stop event") from None
            return {"success": True, "message": "Generation stopped"}
        gen.stop_requested = True
        gen.cancel_event.set()
        assert gen.task is not None
        try:  # let the answer stream flush so the stop event is the log's last word
            await asyncio.wait_for(asyncio.shield(gen.task), self.settings.stop_wait_s)
        except TimeoutError:
            if not gen.stop_written:
                gen.stop_written = True
                await self._append_quietly(gen, self.stop_event(session_id, message_id))
        except Exception:
            pass  # the generation's own failure is already in the log
        return {"success": True, "message": "Generation stopped"}


def create_app(
    lab: Any,
    *,
    manager: StreamManager | None = None,
    directory: StreamDirectory | None = None,
    settings: StreamServerSettings | None = None,
    server: ServerConfig | Mapping[str, Any] | None = None,
) -> FastAPI:
    """The FastAPI app serving ``lab``. ``manager`` replaces ``lab.stream_manager`` when given;
    the directory defaults to the one that lives beside the manager (Redis next to Redis).
    ``server`` (keys and limits) defaults to the lab config's ``server`` section plus the
    ``RAG_LAB_API_KEYS`` environment variable."""
    from rag_lab.stream.factory import build_stream_directory

    if manager is not None:
        lab.stream_manager = manager
    manager = lab.stream_manager
    if not isinstance(server, ServerConfig):
        server = ServerConfig.from_config(server if server is not None else (lab.config.get("server") or {}))
    service = StreamService(
        lab,
        manager,
        directory or build_stream_directory(manager),
        settings or StreamServerSettings.from_params(lab.params),
        server,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
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
    async def health(request: Request) -> dict[str, Any]:
        """``{"status": "ok"}`` for anyone (load balancers); the details for authenticated callers."""
        out: dict[str, Any] = {"status": "ok"}
        if service.config.keyless or bearer_token(request.headers.get("authorization")):
            caller(request)
            out["stream_manager"] = type(manager).__name__
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
    async def list_sessions(request: Request) -> dict[str, Any]:
        principal = caller(request)
        try:
            page = int(request.query_params.get("page", "1"))
            page_size = int(request.query_params.get("page_size", "20"))
            got = await service.call(service.sessions.list_sessions, principal.user_id, page, page_size)
        except ValueError as exc:
            raise ApiError(400, str(exc), "page") from None
        items = [session_dict(x) for x in got.items if owns(x, principal)]
        return {"success": True, "data": items, "total": got.total, "page": got.page, "page_size": got.page_size}

    @app.get("/sessions/{session_id}")
    async def get_session(session_id: str, request: Request) -> dict[str, Any]:
        _check_id(session_id, "session_id")
        session = await service.owned_session(session_id, caller(request))
        messages = await service.call(service.sessions.list_messages, session_id)
        return {"success": True, "data": dict(session_dict(session), messages=[message_dict(m) for m in messages])}

    @app.delete("/sessions/{session_id}")
    async def delete_session(session_id: str, request: Request) -> dict[str, Any]:
        _check_id(session_id, "session_id")
        await service.owned_session(session_id, caller(request))
        await service.call(service.sessions.delete_session, session_id)
        return {"success": True}

    @app.post("/knowledge-chat/{session_id}", openapi_extra=KNOWLEDGE_CHAT_OPENAPI)
    async def knowledge_chat(session_id: str, request: Request):
        _check_id(session_id, "session_id")
        principal = caller(request)
        _check_resource_urls(request)
        body = await _json_object(request, '{"query": "When was the lighthouse built?"}', service.config)
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
        names = _string_list(body, "knowledge_base_ids") + _string_list(body, "kb")
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
    async def continue_stream(session_id: str, request: Request):
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
    async def stop(session_id: str, request: Request) -> dict[str, Any]:
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
