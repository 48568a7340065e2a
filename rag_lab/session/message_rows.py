"""The ``messages`` table: user and assistant messages paired by ``request_id``, with references,
image URLs and captions, attachment prompt, rendered content and completion flag; written with
the session's ``updated_at`` in one commit, read newest first or in chronological order. The
methods are those of :class:`~rag_lab.session.store.MemoryMessageStore`, so the pipeline works
with either store. :class:`MessageRows` is one of the parts of
:class:`~rag_lab.session.sqlite_store.SQLiteSessionStore`.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from typing import Any, cast

from rag_lab.session.session_db import SessionDB
from rag_lab.session.sqlite_schema import _CHRONO, _JSON_FIELDS, _NEWEST, SessionNotFound, _dumps, _refs_json
from rag_lab.session.store import Message, MessageWrites, check_message_fields, first_caption_update
from rag_lab.types.search_result import SearchResult


class MessageRows(MessageWrites, SessionDB):
    """A session's messages: add, read, update, complete, list."""

    @staticmethod
    def _message(row: sqlite3.Row) -> Message:
        return Message(
            id=row["id"],
            session_id=row["session_id"],
            request_id=row["request_id"],
            role=row["role"],
            content=row["content"],
            created_at=row["created_at"],
            knowledge_references=[SearchResult.from_dict(d) for d in json.loads(row["knowledge_references"])],
            image_captions=json.loads(row["image_captions"]),
            image_urls=json.loads(row["image_urls"]),
            attachment_prompt=row["attachment_prompt"],
            rendered_content=row["rendered_content"],
            is_completed=bool(row["is_completed"]),
            is_fallback=bool(row["is_fallback"]),
            used_memories=json.loads(row["used_memories"]),
            agent_steps=json.loads(row["agent_steps"]),
            updated_at=row["updated_at"],
            extra=json.loads(row["extra"]),
        )

    @staticmethod
    def _column_values(fields: dict[str, Any]) -> dict[str, object]:
        out: dict[str, object] = {}
        for k, v in fields.items():
            if k == "knowledge_references":
                out[k] = _refs_json(v)
            elif k in _JSON_FIELDS:
                out[k] = _dumps(list(v) if k != "extra" else dict(v), k)
            elif k in ("is_completed", "is_fallback"):
                out[k] = 1 if v else 0
            else:
                out[k] = v
        return out

    def _insert(self, session_id: str, fields: dict[str, Any]) -> str:
        values = self._column_values(fields)
        mid = str(uuid.uuid4())
        cols = ["id", "session_id", *values]
        with self._lock:
            self._db.execute("BEGIN")  # the message and the session's updated_at in one commit
            try:
                self._db.execute(
                    f"INSERT INTO messages ({', '.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                    [mid, session_id, *values.values()],
                )
                self._db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id))
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError):
                    raise SessionNotFound(
                        f"session '{session_id}' not found (create it before adding messages)"
                    ) from None
                raise
        return mid

    def get_message(self, session_id: str, message_id: str) -> Message:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM messages WHERE id = ? AND session_id = ?", (message_id, session_id)
            ).fetchone()
        if row is None:
            raise KeyError(f"message '{message_id}' not found in session '{session_id}'")
        return self._message(row)

    def update_message(self, session_id: str, message_id: str, **fields: object) -> None:
        check_message_fields(fields, "update_message")
        if not fields:
            self.get_message(session_id, message_id)
            return
        values = self._column_values(fields)
        with self._lock:
            cur = self._db.execute(
                f"UPDATE messages SET {', '.join(f'{k} = ?' for k in values)} WHERE id = ? AND session_id = ?",
                [*values.values(), message_id, session_id],
            )
        if cur.rowcount == 0:
            raise KeyError(f"message '{message_id}' not found in session '{session_id}'")

    def update_rendered_content(self, session_id: str, message_id: str, rendered_content: str) -> None:
        self.update_message(session_id, message_id, rendered_content=rendered_content, updated_at=time.time())

    def update_message_images(
        self, session_id: str, message_id: str, image_urls: list[str], image_captions: list[str]
    ) -> None:
        if len(image_captions) > len(image_urls):
            raise ValueError(f"{len(image_captions)} captions for {len(image_urls)} images")
        self.update_message(
            session_id, message_id, image_urls=image_urls, image_captions=image_captions, updated_at=time.time()
        )

    def set_first_image_caption(self, session_id: str, message_id: str, caption: str) -> bool:
        """Write ``caption`` into the first stored image of the message; False when it has none."""
        with self._lock:
            m = self.get_message(session_id, message_id)
            captions = first_caption_update(m.image_urls, m.image_captions, caption)
            if captions is None:
                return False
            self.update_message(session_id, message_id, image_captions=captions, updated_at=time.time())
            return True

    def finish_message(self, session_id: str, message_id: str, **fields: object) -> None:
        """Spec §9.1 step 1: save content, references, fallback flag, agent steps and used
        memories given in ``fields``, with ``is_completed = True`` and ``updated_at = now``."""
        self.update_message(session_id, message_id, **fields, is_completed=True, updated_at=time.time())

    def complete_message(self, session_id: str, message_id: str, **fields: object) -> Message:
        """:meth:`finish_message`, then the message as stored."""
        self.finish_message(session_id, message_id, **fields)
        return self.get_message(session_id, message_id)

    def get_recent_messages(self, session_id: str, limit: int) -> list[Message]:
        """The ``limit`` newest messages, newest first."""
        if limit <= 0:
            return []
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM messages WHERE session_id = ? ORDER BY {_NEWEST} LIMIT ?", (session_id, limit)
            ).fetchall()
        return [self._message(r) for r in rows]

    def list_messages(self, session_id: str) -> list[Message]:
        """Every message of the session in chronological order."""
        with self._lock:
            return [self._message(r) for r in self._chronological_rows(session_id)]

    def find_message(self, session_id: str, request_id: str, role: str = "assistant") -> Message | None:
        """The newest message of ``role`` for a request id (the stream's message id), or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM messages WHERE session_id = ? AND request_id = ? AND role = ? ORDER BY rowid DESC LIMIT 1",
                (session_id, request_id, role),
            ).fetchone()
        return self._message(row) if row is not None else None

    def message_count(self, session_id: str) -> int:
        with self._lock:
            return int(
                self._db.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
            )

    def _chronological_rows(self, session_id: str) -> list[sqlite3.Row]:
        return cast(
            list[sqlite3.Row],
            self._db.execute(
                f"SELECT * FROM messages WHERE session_id = ? ORDER BY {_CHRONO}", (session_id,)
            ).fetchall(),
        )
