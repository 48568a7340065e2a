"""The per-request EventBus (spec §1.11 "Internal event bus").

Synchronous: ``emit`` calls handlers one after another in registration order and stops at the
first handler error, which it raises. An event without an id gets a random UUID.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class BusEventType:
    THOUGHT = "thought"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    REFERENCES = "references"
    FINAL_ANSWER = "final_answer"
    ERROR = "error"
    SESSION_TITLE = "session_title"
    MEMORY_RECALLED = "memory_recalled"
    AGENT_COMPLETE = "agent.complete"
    STOP = "stop"


@dataclass(slots=True)
class BusEvent:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    timestamp: float = 0.0


Handler = Callable[[BusEvent], None]


def short_id() -> str:
    """8 hex characters of a UUID (the ``<8hex>`` of event ids such as ``<8hex>-answer``)."""
    return uuid.uuid4().hex[:8]


class EventBus:
    def __init__(self) -> None:
        # (event type or None for "every event", handler), in registration order
        self._handlers: list[tuple[str | None, Handler]] = []

    def on(self, event_type: str, handler: Handler) -> None:
        self._handlers.append((event_type, handler))

    def on_any(self, handler: Handler) -> None:
        self._handlers.append((None, handler))

    def emit(self, event_type: str, data: dict[str, object] | None = None, event_id: str = "") -> BusEvent:
        ev = BusEvent(type=event_type, data=dict(data or {}), id=event_id or str(uuid.uuid4()), timestamp=time.time())
        for wanted, h in list(self._handlers):
            if wanted is None or wanted == event_type:
                h(ev)
        return ev
