"""Editing a session's history: forking it (a new session holding a copy of the messages up to
one of them, recording its parent and fork point) and rewinding it (deleting the messages after
one). :class:`HistoryEdits` is one of the parts of
:class:`~rag_lab.session.sqlite_store.SQLiteSessionStore`.
"""

from __future__ import annotations

import sqlite3
import time
import uuid

from rag_lab.session.message_rows import MessageRows
from rag_lab.session.session_rows import SessionRows
from rag_lab.session.sqlite_schema import Session, _dumps


class HistoryEdits(SessionRows, MessageRows):
    """Fork and rewind, each in one transaction."""

    @staticmethod
    def _cut_index(rows: list[sqlite3.Row], message_id: str, session_id: str) -> int:
        for i, r in enumerate(rows):
            if r["id"] == message_id:
                return i
        raise KeyError(f"message '{message_id}' not found in session '{session_id}'")

    def fork_session(
        self, session_id: str, message_id: str | None = None, *, user_id: str | None = None, title: str | None = None
    ) -> Session:
        """A new session holding a copy of the history up to and including ``message_id`` (the
        whole history when None). Copies get new ids and keep request ids and timestamps, so
        pairing and order are unchanged; the new session records its parent and fork point."""
        with self._lock:
            src = self.get_session(session_id)
            rows = self._chronological_rows(session_id)
            if message_id is not None:
                rows = rows[: self._cut_index(rows, message_id, session_id) + 1]
            fork_point = message_id if message_id is not None else (rows[-1]["id"] if rows else "")
            self._db.execute("BEGIN")
            try:
                new_id = str(uuid.uuid4())
                now = time.time()
                self._db.execute(
                    "INSERT INTO sessions (id, user_id, tenant_id, agent_id, title, description, parent_session_id,"
                    " forked_from_message_id, last_request_state, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        new_id,
                        src.user_id if user_id is None else user_id,
                        src.tenant_id,
                        src.agent_id,
                        src.title if title is None else title,
                        src.description,
                        session_id,
                        fork_point,
                        _dumps(src.last_request_state, "last request state"),
                        now,
                        now,
                    ),
                )
                cols = [k for k in rows[0].keys() if k not in ("id", "rowid")] if rows else []
                for r in rows:
                    values = [new_id if k == "session_id" else r[k] for k in cols]
                    self._db.execute(
                        f"INSERT INTO messages (id, {', '.join(cols)}) VALUES ({','.join('?' * (len(cols) + 1))})",
                        [str(uuid.uuid4()), *values],
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return self.get_session(new_id)

    def rewind_session(self, session_id: str, message_id: str, *, keep_message: bool = True) -> int:
        """Delete every message after ``message_id`` (and the message itself when
        ``keep_message`` is False); the number deleted."""
        with self._lock:
            self.get_session(session_id)
            rows = self._chronological_rows(session_id)
            i = self._cut_index(rows, message_id, session_id)
            doomed = [r["id"] for r in rows[i + 1 if keep_message else i :]]
            if doomed:
                self._db.execute("BEGIN")
                try:
                    for k in range(0, len(doomed), 500):
                        part = doomed[k : k + 500]
                        self._db.execute(f"DELETE FROM messages WHERE id IN ({','.join('?' * len(part))})", part)
                    self._db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id))
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        return len(doomed)
