"""Appends to a remote StreamManager (Redis) off the event loop, in order.

The pipeline's stream handler appends from inside the (synchronous) event bus, that is on the
server's event loop: with the Redis backend each append was a blocking round trip there, once per
answer chunk of every running stream, and under CPU load the loop spent its time waiting on
sockets (50 Redis-backed streams got their first frame after 148 s p50 where memory-backed ones
took 9 s). :class:`OrderedAppender` wraps such a manager:

* ``append_event`` only enqueues: one worker thread writes the events in the order they were
  appended (all streams share it, so every stream's order is kept, and the server's own stop and
  error events are ordered with the pipeline's);
* ``submit`` returns the write's future, for callers that must know it landed (the stop endpoint
  answers only once the stop is stored, so another replica sees it);
* ``get_events`` first waits for the writes already queued for that stream (a process reads its
  own writes), then reads; callers run it in a worker thread as before;
* a write that fails is logged and counted (:attr:`failures`), never raised into the pipeline —
  the handler's policy for a briefly unavailable store.

>>> from rag_lab.stream.manager import MemoryStreamManager
>>> from rag_lab.types.stream import StreamEvent
>>> m = OrderedAppender(MemoryStreamManager())
>>> for i in range(3):
...     m.append_event("s", "m", StreamEvent(f"e{i}", "answer", str(i), False))
>>> [e.content for e in m.get_events("s", "m")[0]]
['0', '1', '2']
>>> m.close()
"""

from __future__ import annotations

import functools
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from rag_lab.types.stream import StreamEvent

if TYPE_CHECKING:
    from rag_lab.stream.manager import StreamManager

log = logging.getLogger(__name__)

__all__ = ["OrderedAppender"]


class OrderedAppender:
    """A StreamManager whose appends run in one background thread, in order (module docstring)."""

    def __init__(self, inner: StreamManager) -> None:
        self.inner = inner
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rag_lab-stream-append")
        self._last: dict[tuple[str, str], Future[None]] = {}
        self._lock = threading.Lock()
        self.failures = 0
        self.writes = 0

    def __repr__(self) -> str:
        return f"OrderedAppender({self.inner!r})"

    def __getattr__(self, name: str) -> object:  # ping, key, client, prefix, ttl_s, delete, …
        return getattr(self.inner, name)

    def _write(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        try:
            self.inner.append_event(session_id, message_id, event)
            self.writes += 1
        except Exception as exc:
            self.failures += 1
            log.warning("stream %s/%s: could not store a %s event: %s", session_id, message_id, event.type, exc)
            raise

    def submit(self, session_id: str, message_id: str, event: StreamEvent) -> Future[None]:
        """Queue one append; the future is done when it is stored (or holds the error)."""
        fut = self._pool.submit(self._write, session_id, message_id, event)
        key = (session_id, message_id)
        with self._lock:
            self._last[key] = fut
        fut.add_done_callback(functools.partial(self._forget, key))
        return fut

    def _forget(self, key: tuple[str, str], fut: Future[None]) -> None:
        with self._lock:
            if self._last.get(key) is fut:
                del self._last[key]

    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        """Queue one append and return at once (failures are logged and counted)."""
        self.submit(session_id, message_id, event)

    def pending(self, session_id: str, message_id: str) -> Future[None] | None:
        with self._lock:
            return self._last.get((session_id, message_id))

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]:
        """The stream from ``from_offset``, after this process's queued writes to it landed."""
        fut = self.pending(session_id, message_id)
        if fut is not None:
            try:
                fut.result()
            except Exception:
                pass  # logged by the writer; read what is there
        result: tuple[list[StreamEvent], int] = self.inner.get_events(session_id, message_id, from_offset)
        return result

    def flush(self) -> None:
        """Wait until every queued append ran."""
        self._pool.submit(lambda: None).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()
