"""Messages of a session, paired by request id (spec §4.1, §9)."""
from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from rag_lab.types.search_result import SearchResult


@dataclass(slots=True)
class Message:
    id: str
    session_id: str
    request_id: str
    role: str
    content: str
    created_at: float
    knowledge_references: list[SearchResult] = field(default_factory=list)
    image_captions: list[str] = field(default_factory=list)
    attachment_prompt: str = ""
    rendered_content: str = ""
    is_completed: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


class MemoryMessageStore:
    """A thread-safe, in-process message store."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._messages: dict[str, list[Message]] = {}

    def add_message(
        self,
        session_id: str,
        role: str,
        content: str,
        request_id: str,
        knowledge_references: list[SearchResult] | None = None,
        created_at: float | None = None,
        **extra: Any,
    ) -> Message:
        msg = Message(
            id=str(uuid.uuid4()),
            session_id=session_id,
            request_id=request_id,
            role=role,
            content=content,
            created_at=time.time() if created_at is None else created_at,
            knowledge_references=[r.copy() for r in knowledge_references or []],
            **extra,
        )
        with self._lock:
            self._messages.setdefault(session_id, []).append(msg)
        return msg

    def update_message(self, session_id: str, message_id: str, **fields: Any) -> None:
        with self._lock:
            for m in self._messages.get(session_id, []):
                if m.id == message_id:
                    for k, v in fields.items():
                        setattr(m, k, v)
                    return
        raise KeyError(f"message '{message_id}' not found in session '{session_id}'")

    def get_recent_messages(self, session_id: str, limit: int) -> list[Message]:
        """The ``limit`` newest messages, newest first."""
        with self._lock:
            msgs = sorted(self._messages.get(session_id, []), key=lambda m: m.created_at, reverse=True)
        return msgs[: max(0, limit)]
