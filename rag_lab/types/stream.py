"""Response types, the SSE payload and the stored stream event (spec §1.11)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ResponseType(str, Enum):
    ANSWER = "answer"
    REFERENCES = "references"
    THINKING = "thinking"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    ERROR = "error"
    REFLECTION = "reflection"
    SESSION_TITLE = "session_title"
    AGENT_QUERY = "agent_query"
    COMPLETE = "complete"
    TOOL_APPROVAL_REQUIRED = "tool_approval_required"
    TOOL_APPROVAL_RESOLVED = "tool_approval_resolved"
    MCP_OAUTH_REQUIRED = "mcp_oauth_required"
    MCP_OAUTH_RESOLVED = "mcp_oauth_resolved"
    MEMORY_RECALLED = "memory_recalled"

    def __str__(self) -> str:
        return self.value


#: The literal the SSE layer uses for a user stop notification.
STOP_RESPONSE_TYPE = "stop"


@dataclass(slots=True)
class StreamResponse:
    """The SSE ``data`` object sent to clients."""

    id: str
    response_type: str
    content: str = ""
    done: bool = False
    knowledge_references: list[dict[str, object]] = field(default_factory=list)
    session_id: str = ""
    assistant_message_id: str = ""
    tool_calls: list[dict[str, object]] = field(default_factory=list)
    data: dict[str, object] = field(default_factory=dict)
    usage: dict[str, object] = field(default_factory=dict)
    finish_reason: str = ""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.id,
            "response_type": str(self.response_type),
            "content": self.content,
            "done": self.done,
        }
        for name in ("knowledge_references", "session_id", "assistant_message_id", "tool_calls", "data", "usage"):
            value = getattr(self, name)
            if value:
                out[name] = value
        out["finish_reason"] = self.finish_reason
        return out


@dataclass(slots=True)
class StreamEvent:
    """The stored form of one event in a StreamManager (append-only, read by offset)."""

    id: str
    type: str
    content: str = ""
    done: bool = False
    timestamp: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)
    #: unique per append (``id`` is shared by all deltas of one answer): a store that sees the
    #: same append id twice (a retried write whose reply was lost) keeps one copy
    append_id: str = ""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.id,
            "type": str(self.type),
            "content": self.content,
            "done": self.done,
            "timestamp": self.timestamp,
        }
        if self.data:
            out["data"] = self.data
        if self.append_id:
            out["append_id"] = self.append_id
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamEvent:
        return cls(
            id=str(d.get("id", "")),
            type=str(d.get("type", "")),
            content=str(d.get("content", "")),
            done=bool(d.get("done", False)),
            timestamp=float(d.get("timestamp") or 0.0),
            data=dict(d.get("data") or {}),
            append_id=str(d.get("append_id") or ""),
        )

    def stamp(self) -> StreamEvent:
        """Set the timestamp and the append id when missing (a retry keeps both)."""
        if not self.timestamp:
            self.timestamp = time.time()
        if not self.append_id:
            self.append_id = uuid.uuid4().hex
        return self
