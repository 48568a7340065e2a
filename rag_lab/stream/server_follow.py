"""Following a stream's log as SSE frames (spec §8.3, §8.4): the replayed events, then the log
from an offset until a terminal event, with keep-alives; when a follower without ``complete``
ends is described in :mod:`rag_lab.stream.server`. :class:`LogFollower` is one of the parts of
:class:`~rag_lab.stream.server_service.StreamService`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from rag_lab.stream.server_sse import _TERMINAL, KEEPALIVE_FRAME, build_stream_response, sse_frame
from rag_lab.stream.server_state import ServiceState
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent

#: the server's logger name, unchanged by the split into modules (log filters keep working)
log = logging.getLogger("rag_lab.stream.server")


class LogFollower(ServiceState):
    """SSE frames of one stream."""

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
