"""StreamManager: an append-only event log per (session, message), read by offset (spec §8.1).

Producers append; consumers (SSE, continue-stream, the lab, replay widgets) read from an offset,
so a reader can reconnect and resume at any time. The Redis backend comes with the streams issue;
it implements the same two methods.
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
