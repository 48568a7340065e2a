"""The state behind the chat server's endpoints (:class:`StreamService`): the lab, the event log,
the message directory and the generations running in this process; starting a generation as a
server-owned task, its stop watcher, crash-recovery heartbeats, following a log as SSE frames,
ownership of sessions and KBs, and stop.

Kept whole: one class whose methods share the running generations, the backends and the lab.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from rag_lab.stream.auth import Principal
from rag_lab.stream.bus import short_id
from rag_lab.stream.manager import MemoryStreamDirectory, MemoryStreamManager, StreamDirectory, StreamManager
from rag_lab.stream.pipeline_loop import PipelineLoop
from rag_lab.stream.server_config import ServerConfig
from rag_lab.stream.server_http import ApiError, owns
from rag_lab.stream.server_sse import (
    _TERMINAL,
    KEEPALIVE_FRAME,
    StreamServerSettings,
    build_stream_response,
    sse_frame,
)
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent

#: the server's logger name, unchanged by the split into modules (log filters keep working)
log = logging.getLogger("rag_lab.stream.server")


def _warm_imports() -> None:
    """Import what the first request would otherwise import on the event loop (the openai
    client's resources take seconds cold, during which no stream, stop or health is served)."""
    import importlib

    for name in ("openai.resources.chat.completions", "openai.resources.embeddings"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


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
        #: generations over whose turn the store could not yet be told (an outage past the
        #: store's window): saved and cleared by the maintenance loop once the store is back
        self.unsettled: dict[tuple[str, str], Generation] = {}
        self.active_followers = 0
        #: this server's identity in the crash-recovery records (rag_lab.stream.recovery)
        self.instance = uuid.uuid4().hex
        self._maintenance: asyncio.Task | None = None
        # the in-memory backends never block; Redis calls go to a worker thread
        self._inline = isinstance(manager, MemoryStreamManager) and isinstance(directory, MemoryStreamDirectory)
        #: where generations run (None: on the server's loop); see StreamServerSettings.pipeline_thread
        self.pipeline: PipelineLoop | None = PipelineLoop() if settings.pipeline_thread else None

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
                if running or self.unsettled:
                    await asyncio.to_thread(self.sessions.heartbeat_generations, self.instance, running)
            except Exception as exc:
                log.warning("could not refresh the in-flight records: %s", exc)
            for gen in list(self.unsettled.values()):
                if await self._settle(gen):
                    del self.unsettled[(gen.session_id, gen.message_id)]
            # bounded memory while idle too: finished generations and expired in-process logs go
            self._forget_finished()
            expire = getattr(self.manager, "expire", None)
            if expire is not None:
                expire()
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

    async def _title_and_answer(self, gen: Generation, cancel_event: asyncio.Event) -> Any:
        """The title task (when due) and the pipeline's run for ``gen``, on the running loop."""
        await self._start_title(gen)
        return await self.lab.aask(
            gen.query,
            kb=gen.kbs or None,
            session_id=gen.session_id,
            message_id=gen.message_id,
            cancel_event=cancel_event,
            snapshots=False,
            user_id=gen.user_id,
            tenant_id=gen.tenant_id,
            on_event=self._track(gen),
        )

    async def _generate(self, gen: Generation) -> None:
        watcher = asyncio.get_running_loop().create_task(self._stop_watcher(gen))
        try:
            if self.pipeline is None:
                gen.run = await self._title_and_answer(gen, gen.cancel_event)
            else:
                gen.run = await self.pipeline.run(lambda stop: self._title_and_answer(gen, stop), gen.cancel_event)
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
            if not await self._settle(gen):  # the turn is saved (or failed): nothing left to recover
                self.unsettled[(gen.session_id, gen.message_id)] = gen
            gen.finished_at = time.monotonic()

    async def _settle(self, gen: Generation) -> bool:
        """Save a failed turn with its cause and clear the in-flight record
        (:func:`~rag_lab.stream.recovery.settle_turn`); False when the store is still unreachable."""
        from rag_lab.stream.recovery import settle_turn

        try:
            done = await asyncio.to_thread(
                lambda: settle_turn(
                    self.sessions,
                    gen.session_id,
                    gen.message_id,
                    error=gen.error,
                    partial=gen.partial,
                    references=list(gen.references),
                )
            )
        except Exception as exc:
            log.warning("turn %s/%s not settled yet (retrying): %s", gen.session_id, gen.message_id, exc)
            return False
        if done != "ended":
            log.warning("turn %s/%s failed (%s): %s", gen.session_id, gen.message_id, gen.error, done)
        return True

    def _forget_finished(self) -> None:
        """Drop generations that ended more than ``keep_finished_s`` ago (bounded memory: at each
        new ask and every heartbeat, so an idle server lets them go as well)."""
        cutoff = time.monotonic() - self.settings.keep_finished_s
        for key in [k for k, g in self.generations.items() if g.finished() and 0 < g.finished_at < cutoff]:
            del self.generations[key]

    async def store_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        """Append one event and return once it is stored (in order with the pipeline's own appends
        when the log is written by a background :class:`~rag_lab.stream.appender.OrderedAppender`)."""
        from rag_lab.stream.appender import OrderedAppender

        if isinstance(self.manager, OrderedAppender):
            await asyncio.wrap_future(self.manager.submit(session_id, message_id, event))
        else:
            await self.call(self.manager.append_event, session_id, message_id, event)

    async def _append_quietly(self, gen: Generation, event: StreamEvent) -> None:
        try:
            await self.store_event(gen.session_id, gen.message_id, event)
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
        """§8.5: a stop written by another replica reaches this generation through the log. A
        backend that can say whether a stream is stopped (``is_stopped``: a key lookup in Redis)
        is asked that instead of having every new event read and decoded."""
        offset = 0
        deadline = time.monotonic() + self.settings.stop_watch_max_s
        is_stopped = getattr(self.manager, "is_stopped", None)
        while time.monotonic() < deadline:
            await asyncio.sleep(self.settings.stop_watch_interval_s)
            if is_stopped is not None:
                try:
                    stopped = await self.call(is_stopped, gen.session_id, gen.message_id)
                except Exception as exc:
                    log.debug("stop watcher check failed (retrying): %s", exc)
                    continue
                if stopped:
                    gen.stop_requested = gen.stop_written = True
                    gen.cancel_event.set()
                    return
                continue
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
        if self.pipeline is not None:
            await asyncio.to_thread(self.pipeline.close, timeout)
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
            last_event = last_sent = time.monotonic()
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
                    last_sent = time.monotonic()
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
                if s.keepalive_s > 0 and now - last_sent >= s.keepalive_s:
                    yield KEEPALIVE_FRAME
                    last_sent = now
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
                await self.store_event(session_id, message_id, self.stop_event(session_id, message_id))
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
