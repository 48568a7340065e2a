"""The state of the chat server's :class:`~rag_lab.stream.server_service.StreamService`: the lab,
the event log, the message directory, the generations running in this process
(:class:`Generation`), and writing events to the log in order with the pipeline's own.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from rag_lab.stream.manager import MemoryStreamDirectory, MemoryStreamManager, StreamDirectory, StreamManager
from rag_lab.stream.pipeline_loop import PipelineLoop
from rag_lab.stream.server_config import ServerConfig
from rag_lab.stream.server_sse import StreamServerSettings
from rag_lab.types.stream import STOP_RESPONSE_TYPE, StreamEvent

if TYPE_CHECKING:
    from rag_lab.lab.lab import Lab, Run

_T = TypeVar("_T")

#: the server's logger name, unchanged by the split into modules (log filters keep working)
log = logging.getLogger("rag_lab.stream.server")


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
    references: list[dict[str, object]] = field(default_factory=list)
    task: asyncio.Task[object] | None = None
    stop_requested: bool = False
    stop_written: bool = False
    run: Run | None = None
    error: str = ""
    finished_at: float = 0.0  # time.monotonic() when the task ended

    def finished(self) -> bool:
        return self.task is not None and self.task.done()


class ServiceState:
    """The lab, the log, the directory, running generations; appending to the log."""

    def __init__(
        self,
        lab: Lab,
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
        self._maintenance: asyncio.Task[object] | None = None
        # the in-memory backends never block; Redis calls go to a worker thread
        self._inline = isinstance(manager, MemoryStreamManager) and isinstance(directory, MemoryStreamDirectory)
        #: where generations run (None: on the server's loop); see StreamServerSettings.pipeline_thread
        self.pipeline: PipelineLoop | None = PipelineLoop() if settings.pipeline_thread else None

    async def call(self, fn: Callable[..., _T], *args: object) -> _T:
        if self._inline:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

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
