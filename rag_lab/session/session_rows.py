"""The ``sessions`` table: creating, reading, listing (pinned first, then the most recently
updated, a page at a time), updating and deleting sessions. Deleting a session deletes its
messages (a foreign key). :class:`SessionRows` is one of the parts of
:class:`~rag_lab.session.sqlite_store.SQLiteSessionStore`.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Sequence
from typing import Any

from rag_lab.session.session_db import SessionDB
from rag_lab.session.sqlite_schema import (
    _SESSION_UPDATABLE,
    MAX_PAGE,
    MAX_PAGE_SIZE,
    Session,
    SessionAccessDenied,
    SessionNotFound,
    SessionPage,
    _dumps,
)


class SessionRows(SessionDB):
    """Session CRUD: owner, title, pinned flag, last request state, fork lineage."""

    @staticmethod
    def _session(row: sqlite3.Row) -> Session:
        return Session(
            id=row["id"],
            user_id=row["user_id"],
            tenant_id=row["tenant_id"],
            agent_id=row["agent_id"],
            title=row["title"],
            description=row["description"],
            is_pinned=bool(row["is_pinned"]),
            parent_session_id=row["parent_session_id"],
            forked_from_message_id=row["forked_from_message_id"],
            last_request_state=json.loads(row["last_request_state"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    def create_session(
        self,
        user_id: str = "",
        *,
        session_id: str | None = None,
        title: str = "",
        description: str = "",
        agent_id: str = "",
        tenant_id: int = 0,
        parent_session_id: str = "",
        forked_from_message_id: str = "",
        created_at: float | None = None,
    ) -> Session:
        now = time.time() if created_at is None else created_at
        sid = session_id or str(uuid.uuid4())
        with self._lock:
            try:
                self._db.execute(
                    "INSERT INTO sessions (id, user_id, tenant_id, agent_id, title, description, parent_session_id,"
                    " forked_from_message_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (
                        sid,
                        user_id,
                        tenant_id,
                        agent_id,
                        title,
                        description,
                        parent_session_id,
                        forked_from_message_id,
                        now,
                        now,
                    ),
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"session '{sid}' already exists") from None
        return self.get_session(sid)

    def ensure_session(self, session_id: str, user_id: str = "", **fields: Any) -> Session:
        """The session ``session_id``, created (owned by ``user_id``) when it does not exist."""
        with self._lock:
            try:
                return self.get_session(session_id)
            except SessionNotFound:
                return self.create_session(user_id, session_id=session_id, **fields)

    def get_session(self, session_id: str) -> Session:
        with self._lock:
            row = self._db.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f"session '{session_id}' not found")
        return self._session(row)

    def get_owned_session(self, session_id: str, user_id: str) -> Session:
        """The session when ``user_id`` owns it (stop, resume, delete); else SessionAccessDenied."""
        s = self.get_session(session_id)
        if s.user_id != user_id:
            raise SessionAccessDenied(f"session '{session_id}' does not belong to user '{user_id}'")
        return s

    def list_sessions(self, user_id: str, page: int = 1, page_size: int = 20) -> SessionPage:
        """The user's sessions, pinned first, then the most recently updated; ``page`` from 1."""
        if not isinstance(page, int) or not 1 <= page <= MAX_PAGE:
            raise ValueError(f"page must be an integer in [1, {MAX_PAGE}], got {page!r:.40}")
        if not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be an integer in [1, {MAX_PAGE_SIZE}], got {page_size!r}")
        with self._lock:
            total = self._db.execute("SELECT COUNT(*) FROM sessions WHERE user_id = ?", (user_id,)).fetchone()[0]
            rows = self._db.execute(
                "SELECT * FROM sessions WHERE user_id = ? ORDER BY is_pinned DESC, updated_at DESC, rowid DESC"
                " LIMIT ? OFFSET ?",
                (user_id, page_size, (page - 1) * page_size),
            ).fetchall()
        return SessionPage([self._session(r) for r in rows], total, page, page_size)

    def all_session_ids(self) -> list[str]:
        """Every session's id, any user, oldest first (what ``testset --from-sessions`` reads)."""
        with self._lock:
            rows = self._db.execute("SELECT id FROM sessions ORDER BY created_at, rowid").fetchall()
        return [r[0] for r in rows]

    def _touch_session(self, session_id: str, sets: str, args: Sequence[object]) -> None:
        with self._lock:
            cur = self._db.execute(
                f"UPDATE sessions SET {sets}, updated_at = ? WHERE id = ?", (*args, time.time(), session_id)
            )
        if cur.rowcount == 0:
            raise SessionNotFound(f"session '{session_id}' not found")

    def update_session(self, session_id: str, **fields: object) -> Session:
        unknown = sorted(set(fields) - _SESSION_UPDATABLE)
        if unknown:
            raise TypeError(
                f"update_session: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_SESSION_UPDATABLE))}"
            )
        if fields:
            self._touch_session(session_id, ", ".join(f"{k} = ?" for k in fields), list(fields.values()))
        return self.get_session(session_id)

    def set_pinned(self, session_id: str, pinned: bool) -> Session:
        self._touch_session(session_id, "is_pinned = ?", [1 if pinned else 0])
        return self.get_session(session_id)

    def update_last_request_state(self, session_id: str, state: dict[str, object]) -> Session:
        """What the input bar restores (agent, model, KBs, web search, thinking...)."""
        if not isinstance(state, dict):
            raise TypeError(f"last request state must be a dict, got {type(state).__name__}")
        self._touch_session(session_id, "last_request_state = ?", [_dumps(state, "last request state")])
        return self.get_session(session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete the session and its messages; False when it did not exist."""
        with self._lock:
            return bool(self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0)

    def batch_delete_sessions(self, session_ids: Sequence[str], user_id: str | None = None) -> int:
        """Delete several sessions (only the user's own when ``user_id`` is given); the count."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        sql = f"DELETE FROM sessions WHERE id IN ({marks})"
        args: list[object] = list(ids)
        if user_id is not None:
            sql += " AND user_id = ?"
            args.append(user_id)
        with self._lock:
            self._db.execute("BEGIN")
            try:
                n = self._db.execute(sql, args).rowcount
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return int(n)

    def purge_sessions(self, user_id: str) -> int:
        """Delete every session of a user; the count."""
        with self._lock:
            return int(self._db.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,)).rowcount)
