"""Messages of a session, paired by request id (spec §4.1, §9), and the in-process store.

Both stores (:class:`MemoryMessageStore` here, ``SQLiteSessionStore`` in ``sqlite_store``) offer
the same message methods, which is all the pipeline uses:

* ``add_message(session_id, role, content, request_id, knowledge_references=None,
  created_at=None, **fields)``, and ``insert_message`` (the same, returning the id only);
* ``update_message(session_id, message_id, **fields)`` (``KeyError`` when unknown);
* ``get_message(session_id, message_id)``;
* ``get_recent_messages(session_id, limit)``: the newest first (LOAD_HISTORY re-sorts them);
* ``update_rendered_content`` and ``set_first_image_caption`` (written asynchronously by
  INTO_CHAT_MESSAGE and QUERY_UNDERSTAND);
* ``finish_message`` (spec §9.1 step 1) and ``complete_message`` (the same, returning the
  message as stored).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict, Unpack

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
    #: one caption per stored image (same order as ``image_urls``; "" when not described yet)
    image_captions: list[str] = field(default_factory=list)
    image_urls: list[str] = field(default_factory=list)
    attachment_prompt: str = ""
    rendered_content: str = ""
    is_completed: bool = True
    is_fallback: bool = False
    used_memories: list[object] = field(default_factory=list)
    agent_steps: list[object] = field(default_factory=list)
    updated_at: float = 0.0
    extra: dict[str, object] = field(default_factory=dict)


#: fields a caller may set through ``add_message(**fields)`` / ``update_message(**fields)``
MESSAGE_FIELDS = frozenset(f.name for f in fields(Message)) - {"id", "session_id"}


class MessageFields(TypedDict, total=False):
    """The optional fields of a new message (``add_message`` / ``insert_message`` keywords)."""

    knowledge_references: list[SearchResult]
    created_at: float
    updated_at: float
    image_captions: list[str]
    image_urls: list[str]
    attachment_prompt: str
    rendered_content: str
    is_completed: bool
    is_fallback: bool
    used_memories: list[object]
    agent_steps: list[object]
    extra: dict[str, object]


def check_message_fields(given: Mapping[str, object], where: str) -> None:
    unknown = sorted(set(given) - MESSAGE_FIELDS)
    if unknown:
        raise TypeError(
            f"{where}: unknown message field(s) {', '.join(unknown)}; known: {', '.join(sorted(MESSAGE_FIELDS))}"
        )


def first_caption_update(image_urls: list[str], captions: list[str], caption: str) -> list[str] | None:
    """The captions after writing ``caption`` into the first image's caption, or None when the
    message stores no image (there is nothing to caption)."""
    count = max(len(image_urls), len(captions))
    if count == 0:
        return None
    out = list(captions) + [""] * (count - len(captions))
    out[0] = caption
    return out


class MessageWrites:
    """``insert_message`` / ``add_message`` of both stores: the fields checked and stamped here,
    stored by the store's ``_insert`` (which returns the new message's id)."""

    def insert_message(
        self, session_id: str, role: str, content: str, request_id: str, **fields: Unpack[MessageFields]
    ) -> str:
        """Store a message; the session must exist. Returns its id (:meth:`add_message` reads the
        message back)."""
        given: dict[str, object] = dict(fields)
        check_message_fields(given, "add_message")
        now = given.pop("created_at", None)
        now = time.time() if now is None else now
        row = {
            "role": role,
            "content": content,
            "request_id": request_id,
            "created_at": now,
            "updated_at": now,
            **given,
            "knowledge_references": given.get("knowledge_references") or [],
        }
        return self._insert(session_id, row)

    def add_message(
        self, session_id: str, role: str, content: str, request_id: str, **fields: Unpack[MessageFields]
    ) -> Message:
        """:meth:`insert_message` (same arguments), returning the message as stored."""
        return self.get_message(session_id, self.insert_message(session_id, role, content, request_id, **fields))

    def _insert(self, session_id: str, fields: dict[str, Any]) -> str:
        raise NotImplementedError

    def get_message(self, session_id: str, message_id: str) -> Message:
        raise NotImplementedError


class MemoryMessageStore(MessageWrites):
    """A thread-safe, in-process message store."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._messages: dict[str, list[Message]] = {}

    def _insert(self, session_id: str, fields: dict[str, Any]) -> str:
        refs = [r.copy() for r in fields["knowledge_references"]]
        msg = Message(id=str(uuid.uuid4()), session_id=session_id, **{**fields, "knowledge_references": refs})
        with self._lock:
            self._messages.setdefault(session_id, []).append(msg)
        return msg.id

    def _find(self, session_id: str, message_id: str) -> Message:
        for m in self._messages.get(session_id, []):
            if m.id == message_id:
                return m
        raise KeyError(f"message '{message_id}' not found in session '{session_id}'")

    def get_message(self, session_id: str, message_id: str) -> Message:
        with self._lock:
            return self._find(session_id, message_id)

    def update_message(self, session_id: str, message_id: str, **fields: object) -> None:
        check_message_fields(fields, "update_message")
        with self._lock:
            m = self._find(session_id, message_id)
            for k, v in fields.items():
                setattr(m, k, v)

    def update_rendered_content(self, session_id: str, message_id: str, rendered_content: str) -> None:
        self.update_message(session_id, message_id, rendered_content=rendered_content, updated_at=time.time())

    def set_first_image_caption(self, session_id: str, message_id: str, caption: str) -> bool:
        """Write ``caption`` into the first stored image of the message; False when it has none."""
        with self._lock:
            m = self._find(session_id, message_id)
            captions = first_caption_update(m.image_urls, m.image_captions, caption)
            if captions is None:
                return False
            m.image_captions, m.updated_at = captions, time.time()
            return True

    def finish_message(self, session_id: str, message_id: str, **fields: object) -> None:
        """Spec §9.1 step 1: save the given fields with ``is_completed`` and ``updated_at = now``."""
        self.update_message(session_id, message_id, **fields, is_completed=True, updated_at=time.time())

    def complete_message(self, session_id: str, message_id: str, **fields: object) -> Message:
        """:meth:`finish_message`, then the message."""
        self.finish_message(session_id, message_id, **fields)
        return self.get_message(session_id, message_id)

    def get_recent_messages(self, session_id: str, limit: int) -> list[Message]:
        """The ``limit`` newest messages, newest first."""
        with self._lock:
            msgs = sorted(self._messages.get(session_id, []), key=lambda m: m.created_at, reverse=True)
        return msgs[: max(0, limit)]
