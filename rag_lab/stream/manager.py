"""StreamManager: an append-only event log per (session, message), read by offset (spec §8.1).

Producers append; consumers (SSE, continue-stream, the lab, replay widgets) read from an offset,
so a reader can reconnect and resume at any time. The Redis backend
(:mod:`rag_lab.stream.redis_manager`) implements the same two methods; :mod:`rag_lab.stream.factory`
chooses one from the config.

A :class:`StreamDirectory` sits next to each backend: the request id of each message's stream
(and a first-claim session owner, which the HTTP layer no longer reads: owners live in the SQLite
session store, see docs/security.md). It lives in the same backend as the events so that several
server replicas share it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rag_lab.types.params import PipelineParams
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent

log = logging.getLogger(__name__)
#: the spec's stream TTL (§8.1: 1 h), used by both backends
DEFAULT_TTL_S: int = PipelineParams.model_fields["stream_ttl_s"].default


class StreamManager(Protocol):
    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None: ...

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]: ...


@dataclass(slots=True)
class _Log:
    events: list[StreamEvent] = field(default_factory=list)
    append_ids: set[str] = field(default_factory=set)
    nbytes: int = 0
    last_append: float = 0.0
    dropped: int = 0
    #: a ``stop`` event is stored: the log takes nothing more
    stopped: bool = False


#: event types a full stream still accepts, so that its readers always learn that it ended
_TERMINAL_TYPES = frozenset({"complete", "stop", "error"})


def answer_text(events: list[StreamEvent]) -> str:
    """The answer a reader of ``events`` saw: the ``answer`` deltas joined."""
    return "".join(e.content for e in events if e.type == ResponseType.ANSWER.value)


def stopped_answer(events: list[StreamEvent]) -> str | None:
    """The answer a reader saw up to the log's ``stop`` event, or None when there is none. A
    stopped log takes no further event (both backends), so this is the whole answer."""
    for i, e in enumerate(events):
        if e.type == STOP_RESPONSE_TYPE:
            return answer_text(events[:i])
    return None


def _event_bytes(event: StreamEvent) -> int:
    from rag_lab.stream.redis_manager import encode_event

    return len(encode_event(event).encode("utf-8"))


class MemoryStreamManager:
    """Single-process backend: one event list per (session, message) behind a lock; reads return
    copies. Bounded (beyond the spec, whose memory backend never forgets anything):

    * a stream expires ``ttl_s`` after its last append (the spec's 1 h stream TTL, as Redis);
    * a stream keeps at most ``max_events_per_stream`` events and ``max_stream_bytes`` bytes of
      JSON; past that, further non-terminal events are dropped (counted and logged once) while
      ``complete`` / ``stop`` / ``error`` are still stored so readers end;
    * all streams together hold at most ``max_total_bytes``; the least recently appended streams
      are evicted first.

    Appends are idempotent by :attr:`StreamEvent.append_id`. A stream whose log holds a ``stop``
    event takes nothing more: stop is final, whoever appends after it."""

    def __init__(
        self,
        *,
        ttl_s: float = DEFAULT_TTL_S,
        max_events_per_stream: int = 50_000,
        max_stream_bytes: int = 32 << 20,
        max_total_bytes: int = 512 << 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, v in (
            ("ttl_s", ttl_s),
            ("max_events_per_stream", max_events_per_stream),
            ("max_stream_bytes", max_stream_bytes),
            ("max_total_bytes", max_total_bytes),
        ):
            if not v > 0:
                raise ValueError(f"MemoryStreamManager {name}={v!r} must be > 0")
        self.ttl_s = float(ttl_s)
        self.max_events_per_stream = int(max_events_per_stream)
        self.max_stream_bytes = int(max_stream_bytes)
        self.max_total_bytes = int(max_total_bytes)
        self._clock = clock
        self._lock = threading.RLock()
        # insertion order = least recently appended first (moved to the end on every append)
        self._logs: OrderedDict[tuple[str, str], _Log] = OrderedDict()
        self.total_bytes = 0
        self._next_sweep = 0.0
        #: appends refused because their stream was stopped
        self.refused_after_stop = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._logs)

    def expire(self) -> int:
        """Drop the streams whose TTL has passed now (appends and reads do it as they go; an idle
        server's maintenance calls this); how many streams are left."""
        with self._lock:
            self._next_sweep = 0.0
            self._expire(self._clock())
            return len(self._logs)

    def _expire(self, now: float) -> None:
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(self.ttl_s / 10, 30.0)
        cutoff = now - self.ttl_s
        while self._logs:
            key, log_ = next(iter(self._logs.items()))
            if log_.last_append > cutoff:
                break
            self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        log_ = self._logs.pop(key)
        self.total_bytes -= log_.nbytes

    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        event.stamp()
        size = _event_bytes(event)
        key = (session_id, message_id)
        with self._lock:
            now = self._clock()
            self._expire(now)
            log_ = self._logs.get(key)
            if log_ is None:
                log_ = self._logs[key] = _Log()
            if event.append_id in log_.append_ids:
                return  # a retry of an append that was already stored
            if log_.stopped:
                self.refused_after_stop += 1
                return  # stop is final: nothing is stored after it (docs/streams.md)
            full = len(log_.events) >= self.max_events_per_stream or log_.nbytes + size > self.max_stream_bytes
            if full and str(event.type) not in _TERMINAL_TYPES:
                if not log_.dropped:
                    log.warning(
                        "stream %s/%s is full (%d events, %d bytes); dropping further events",
                        session_id,
                        message_id,
                        len(log_.events),
                        log_.nbytes,
                    )
                log_.dropped += 1
                return
            log_.events.append(StreamEvent.from_dict(event.to_dict()))
            log_.stopped = str(event.type) == STOP_RESPONSE_TYPE
            log_.append_ids.add(event.append_id)
            log_.nbytes += size
            log_.last_append = now
            self.total_bytes += size
            self._logs.move_to_end(key)
            while self.total_bytes > self.max_total_bytes and len(self._logs) > 1:
                oldest = next(iter(self._logs))
                if oldest == key:
                    break
                log.warning("memory stream store over %d bytes: evicting stream %s/%s", self.max_total_bytes, *oldest)
                self._drop(oldest)

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]:
        with self._lock:
            self._expire(self._clock())
            log_ = self._logs.get((session_id, message_id))
            events = log_.events if log_ is not None else None
            if events is None or from_offset >= len(events):
                return [], from_offset
            start = max(0, from_offset)
            return [StreamEvent.from_dict(e.to_dict()) for e in events[start:]], len(events)

    def is_stopped(self, session_id: str, message_id: str) -> bool:
        """Whether the stream's log holds a ``stop`` (a cheap check for stop watchers)."""
        with self._lock:
            log_ = self._logs.get((session_id, message_id))
            return log_ is not None and log_.stopped

    def dropped(self, session_id: str, message_id: str) -> int:
        """How many events a full stream refused."""
        with self._lock:
            log_ = self._logs.get((session_id, message_id))
            return log_.dropped if log_ is not None else 0


class StreamDirectory(Protocol):
    """Session ownership and per-message request ids, shared like the event logs."""

    def claim_session(self, session_id: str, user_id: str) -> str:
        """Make ``user_id`` the owner unless the session already has one; return the owner."""
        ...

    def session_owner(self, session_id: str) -> str | None: ...

    def record_message(self, session_id: str, message_id: str, request_id: str) -> None: ...

    def message_request_id(self, session_id: str, message_id: str) -> str | None: ...


class MemoryStreamDirectory:
    """Single-process directory: two dicts behind a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: dict[str, str] = {}
        self._requests: dict[tuple[str, str], str] = {}

    def claim_session(self, session_id: str, user_id: str) -> str:
        with self._lock:
            return self._owners.setdefault(session_id, user_id)

    def session_owner(self, session_id: str) -> str | None:
        with self._lock:
            return self._owners.get(session_id)

    def record_message(self, session_id: str, message_id: str, request_id: str) -> None:
        with self._lock:
            self._requests[(session_id, message_id)] = request_id

    def message_request_id(self, session_id: str, message_id: str) -> str | None:
        with self._lock:
            return self._requests.get((session_id, message_id))
