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

:class:`SQLiteSessionStore` is assembled from one part per responsibility, all sharing that
connection and lock: the connection and schema (:mod:`rag_lab.session.session_db`), the
``sessions`` table (:mod:`rag_lab.session.session_rows`), the ``messages`` table
(:mod:`rag_lab.session.message_rows`), fork and rewind (:mod:`rag_lab.session.history_edit`) and
the generations in flight (:mod:`rag_lab.session.in_flight`). The schema and the record types are
in :mod:`rag_lab.session.sqlite_schema` (re-exported here).
"""

from __future__ import annotations

from rag_lab.session.history_edit import HistoryEdits
from rag_lab.session.in_flight import InFlightLog
from rag_lab.session.sqlite_schema import (
    MAX_PAGE,
    MAX_PAGE_SIZE,
    SCHEMA_VERSION,
    InFlight,
    Session,
    SessionAccessDenied,
    SessionNotFound,
    SessionPage,
)

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


class SQLiteSessionStore(HistoryEdits, InFlightLog):
    """Sessions and messages in one SQLite file (``":memory:"`` for a private in-memory one), or
    in a PostgreSQL database when ``path`` is a ``postgresql://`` URL."""
