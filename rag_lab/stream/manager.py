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

import threading
from typing import Protocol

from rag_lab.types.stream import StreamEvent


class StreamManager(Protocol):
    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None: ...

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]: ...


class MemoryStreamManager:
    """Single-process backend: nested dict + lock; reads return copies."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._streams: dict[str, dict[str, list[StreamEvent]]] = {}

    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        event.stamp()
        with self._lock:
            self._streams.setdefault(session_id, {}).setdefault(message_id, []).append(event)

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]:
        with self._lock:
            events = self._streams.get(session_id, {}).get(message_id)
            if events is None or from_offset >= len(events):
                return [], from_offset
            start = max(0, from_offset)
            return [StreamEvent.from_dict(e.to_dict()) for e in events[start:]], len(events)


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
