"""Sessions and messages in SQLite or PostgreSQL (spec §9, seed "Gestion des sessions et messages").

One SQLite file (the embedded default) or one PostgreSQL database (a ``postgresql://`` URL: the
store several server replicas share, through :mod:`rag_lab.knowledge.sqldb`, which runs the same
statements there) holds the tables. ``sessions``: owner, title, pinned flag, the last request state the UI
restores (agent / model / KBs / web / thinking), and the fork lineage (``parent_session_id``,
``forked_from_message_id``). ``messages``: user and assistant messages paired by ``request_id``,
with references, image URLs and captions, attachment prompt, rendered content, completion flag.

The message methods are those of :class:`~rag_lab.session.store.MemoryMessageStore`, so the
pipeline (LOAD_HISTORY, QUERY_UNDERSTAND, INTO_CHAT_MESSAGE) works with either store. Deleting a
session deletes its messages. All methods are thread-safe (one connection behind a lock; the
pipeline calls the slow ones through ``asyncio.to_thread``).

The schema and the record types are in :mod:`rag_lab.session.sqlite_schema` (re-exported here).

Kept whole: one class whose methods share one connection and its lock.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag_lab.knowledge.sqldb import is_postgres, redact
from rag_lab.session.pg_schema import open_pg_sessions
from rag_lab.session.sqlite_schema import (
    _CHRONO,
    _JSON_FIELDS,
    _NEWEST,
    _SCHEMA,
    _SESSION_UPDATABLE,
    MAX_PAGE,
    MAX_PAGE_SIZE,
    SCHEMA_VERSION,
    InFlight,
    Session,
    SessionAccessDenied,
    SessionNotFound,
    SessionPage,
    _dumps,
    _refs_json,
)
from rag_lab.session.store import Message, check_message_fields, first_caption_update
from rag_lab.types.search_result import SearchResult

__all__ = [
    "MAX_PAGE",
    "MAX_PAGE_SIZE",
    "SCHEMA_VERSION",
    "InFlight",
    "SQLiteSessionStore",
    "Session",
    "SessionAccessDenied",
    "SessionNotFound",
    "SessionPage",
]


class SQLiteSessionStore:
    """Sessions and messages in one SQLite file (``":memory:"`` for a private in-memory one), or
    in a PostgreSQL database when ``path`` is a ``postgresql://`` URL."""

    def __init__(self, path: str | Path, *, outage_s: float | None = None) -> None:
        """``outage_s``: how long a PostgreSQL store waits out a restarting server
        (:func:`~rag_lab.knowledge.sqldb.outage_window`; ``None``: the environment or 30 s)."""
        self._lock = threading.RLock()
        if is_postgres(path):
            self.path = redact(str(path))
            self._db: Any = open_pg_sessions(str(path), _SCHEMA, SCHEMA_VERSION, outage_s)
            return
        self.path = str(path)
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise FileNotFoundError(f"{self.path}: folder {parent} does not exist")
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL (as the knowledge store): a commit survives a crash of the process; only a power
                # loss may undo the last ones. FULL synced every message (~8 ms, most of lab.ask's overhead).
                self._db.execute("PRAGMA synchronous = NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ValueError(f"{self.path}: session schema version {version}, this code reads {SCHEMA_VERSION}")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path}: not a usable session database: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions ---------------------------------------------------------------------------
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

    def _touch_session(self, session_id: str, sets: str, args: Sequence[Any]) -> None:
        with self._lock:
            cur = self._db.execute(
                f"UPDATE sessions SET {sets}, updated_at = ? WHERE id = ?", (*args, time.time(), session_id)
            )
        if cur.rowcount == 0:
            raise SessionNotFound(f"session '{session_id}' not found")

    def update_session(self, session_id: str, **fields: Any) -> Session:
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

    def update_last_request_state(self, session_id: str, state: dict[str, Any]) -> Session:
        """What the input bar restores (agent, model, KBs, web search, thinking...)."""
        if not isinstance(state, dict):
            raise TypeError(f"last request state must be a dict, got {type(state).__name__}")
        self._touch_session(session_id, "last_request_state = ?", [_dumps(state, "last request state")])
        return self.get_session(session_id)

    def delete_session(self, session_id: str) -> bool:
        """Delete the session and its messages; False when it did not exist."""
        with self._lock:
            return self._db.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount > 0

    def batch_delete_sessions(self, session_ids: Sequence[str], user_id: str | None = None) -> int:
        """Delete several sessions (only the user's own when ``user_id`` is given); the count."""
        ids = list(dict.fromkeys(session_ids))
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        sql = f"DELETE FROM sessions WHERE id IN ({marks})"
        args: list[Any] = list(ids)
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
        return n

    def purge_sessions(self, user_id: str) -> int:
        """Delete every session of a user; the count."""
        with self._lock:
            return self._db.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,)).rowcount

    # -- fork and rewind ----------------------------------------------------------------------
    def _chronological_rows(self, session_id: str) -> list[sqlite3.Row]:
        return self._db.execute(
            f"SELECT * FROM messages WHERE session_id = ? ORDER BY {_CHRONO}", (session_id,)
        ).fetchall()

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

    # -- messages -----------------------------------------------------------------------------
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
    def _column_values(fields: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
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
        """Store a message; the session must exist (see :meth:`ensure_session`). Returns it as stored."""
        mid = self.insert_message(session_id, role, content, request_id, knowledge_references, created_at, **extra)
        return self.get_message(session_id, mid)

    def insert_message(
        self,
        session_id: str,
        role: str,
        content: str,
        request_id: str,
        knowledge_references: list[SearchResult] | None = None,
        created_at: float | None = None,
        **extra: Any,
    ) -> str:
        """:meth:`add_message` without reading the message back: its id."""
        check_message_fields(extra, "add_message")
        now = time.time() if created_at is None else created_at
        values = self._column_values(
            {
                "role": role,
                "content": content,
                "request_id": request_id,
                "created_at": now,
                "updated_at": now,
                "knowledge_references": knowledge_references or [],
                **extra,
            }
        )
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

    def update_message(self, session_id: str, message_id: str, **fields: Any) -> None:
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

    def finish_message(self, session_id: str, message_id: str, **fields: Any) -> None:
        """Spec §9.1 step 1: save content, references, fallback flag, agent steps and used
        memories given in ``fields``, with ``is_completed = True`` and ``updated_at = now``."""
        self.update_message(session_id, message_id, **fields, is_completed=True, updated_at=time.time())

    def complete_message(self, session_id: str, message_id: str, **fields: Any) -> Message:
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

    # -- generations in flight (crash recovery) ---------------------------------------------
    def begin_generation(
        self,
        session_id: str,
        message_id: str,
        *,
        request_id: str = "",
        user_id: str = "",
        tenant_id: int = 0,
        query: str = "",
        host: str = "",
        pid: int = 0,
        instance: str = "",
    ) -> None:
        """Record that a server process started answering (session, message); a server that
        finds the record of a dead process finishes the message (rag_lab.stream.recovery)."""
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO in_flight (session_id, message_id, request_id, user_id, tenant_id, query, host,"
                " pid, instance, started_at, heartbeat) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT (session_id, message_id) DO UPDATE SET request_id = excluded.request_id,"
                " user_id = excluded.user_id, tenant_id = excluded.tenant_id, query = excluded.query,"
                " host = excluded.host, pid = excluded.pid, instance = excluded.instance,"
                " started_at = excluded.started_at, heartbeat = excluded.heartbeat, partial = '',"
                " knowledge_references = '[]'",
                (session_id, message_id, request_id, user_id, tenant_id, query, host, pid, instance, now, now),
            )

    def heartbeat_generations(self, instance: str, partials: dict[tuple[str, str], tuple[str, list[Any]]]) -> None:
        """Refresh ``instance``'s records, saving each one's answer so far and references."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute("UPDATE in_flight SET heartbeat = ? WHERE instance = ?", (now, instance))
                for (sid, mid), (text, refs) in partials.items():
                    self._db.execute(
                        "UPDATE in_flight SET partial = ?, knowledge_references = ? WHERE session_id = ? AND message_id = ?",
                        (text, _dumps(list(refs), "knowledge_references"), sid, mid),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def end_generation(self, session_id: str, message_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM in_flight WHERE session_id = ? AND message_id = ?", (session_id, message_id))

    def list_generations(self) -> list[InFlight]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM in_flight ORDER BY started_at").fetchall()
        return [
            InFlight(
                **{k: r[k] for k in r.keys() if k != "knowledge_references"},
                knowledge_references=json.loads(r["knowledge_references"]),
            )
            for r in rows
        ]

    def message_count(self, session_id: str) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
