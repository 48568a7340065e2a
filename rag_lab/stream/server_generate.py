"""Running a generation as a server-owned task: the session title (§9.2) and the pipeline's run,
on the server's loop or the pipeline thread; a failure reported in the log; the stop watcher that
reads a stop written by another replica (§8.5); the turn settled once the task ends (saved with
its cause, its in-flight record cleared); finished generations forgotten after a while.
:class:`GenerationRunner` is one of the parts of
:class:`~rag_lab.stream.server_service.StreamService`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rag_lab.stream.bus import short_id
from rag_lab.stream.server_state import Generation, ServiceState
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent

if TYPE_CHECKING:
    from rag_lab.lab.lab import Run
    from rag_lab.stream.bus import BusEvent

#: the server's logger name, unchanged by the split into modules (log filters keep working)
log = logging.getLogger("rag_lab.stream.server")


class GenerationRunner(ServiceState):
    """Starting, running, watching and settling generations."""

    def start(self, gen: Generation) -> None:
        self._forget_finished()
        self.generations[(gen.session_id, gen.message_id)] = gen
        gen.task = asyncio.get_running_loop().create_task(self._generate(gen), name=f"generate-{gen.message_id}")

    def _track(self, gen: Generation) -> Callable[[BusEvent], None]:
        """A bus listener keeping the generation's answer so far and references."""
        from rag_lab.stream.bus import BusEventType
        from rag_lab.types.search_result import SearchResult

        def on_event(ev: BusEvent) -> None:
            if ev.type == BusEventType.FINAL_ANSWER:
                gen.partial += str(ev.data.get("content", ""))
            elif ev.type == BusEventType.REFERENCES:
                gen.references.extend(
                    r.to_dict() if isinstance(r, SearchResult) else dict(r) for r in ev.data.get("references") or []
                )

        return on_event

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

    async def _title_and_answer(self, gen: Generation, cancel_event: asyncio.Event) -> Run:
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
