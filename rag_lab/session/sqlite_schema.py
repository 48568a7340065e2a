"""The session database's schema and records: the tables (sessions, messages, generations in
flight), the orderings, :class:`Session`, :class:`InFlight`, :class:`SessionPage`, the errors, and
JSON encoding of stored fields. :class:`~rag_lab.session.sqlite_store.SQLiteSessionStore` reads
and writes them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from rag_lab.types.search_result import SearchResult

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL DEFAULT '',
    tenant_id INTEGER NOT NULL DEFAULT 0,
    agent_id TEXT NOT NULL DEFAULT '',
    title TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    is_pinned INTEGER NOT NULL DEFAULT 0,
    parent_session_id TEXT NOT NULL DEFAULT '',
    forked_from_message_id TEXT NOT NULL DEFAULT '',
    last_request_state TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_user ON sessions(user_id, is_pinned, updated_at);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    request_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    rendered_content TEXT NOT NULL DEFAULT '',
    knowledge_references TEXT NOT NULL DEFAULT '[]',
    image_urls TEXT NOT NULL DEFAULT '[]',
    image_captions TEXT NOT NULL DEFAULT '[]',
    attachment_prompt TEXT NOT NULL DEFAULT '',
    is_completed INTEGER NOT NULL DEFAULT 1,
    is_fallback INTEGER NOT NULL DEFAULT 0,
    used_memories TEXT NOT NULL DEFAULT '[]',
    agent_steps TEXT NOT NULL DEFAULT '[]',
    extra TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages(session_id, created_at);
CREATE TABLE IF NOT EXISTS in_flight (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    request_id TEXT NOT NULL DEFAULT '',
    user_id TEXT NOT NULL DEFAULT '',
    tenant_id INTEGER NOT NULL DEFAULT 0,
    query TEXT NOT NULL DEFAULT '',
    host TEXT NOT NULL DEFAULT '',
    pid INTEGER NOT NULL DEFAULT 0,
    instance TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL,
    heartbeat REAL NOT NULL,
    partial TEXT NOT NULL DEFAULT '',
    knowledge_references TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (session_id, message_id)
);
"""

# chronological order; at equal timestamps the user message comes first (spec §4.1), then insertion
_CHRONO = "created_at ASC, CASE role WHEN 'user' THEN 0 ELSE 1 END ASC, rowid ASC"
_NEWEST = "created_at DESC, CASE role WHEN 'user' THEN 0 ELSE 1 END DESC, rowid DESC"

_JSON_FIELDS = ("image_urls", "image_captions", "used_memories", "agent_steps", "extra")
_SESSION_UPDATABLE = frozenset({"title", "description", "agent_id", "tenant_id", "user_id"})
MAX_PAGE_SIZE = 1000
#: the largest page a listing accepts: its offset (page x page_size) stays a 64-bit SQLite integer
MAX_PAGE = 1_000_000


class SessionNotFound(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return str(self.args[0]) if self.args else ""


class SessionAccessDenied(PermissionError):
    pass


@dataclass(slots=True)
class Session:
    id: str
    user_id: str = ""
    tenant_id: int = 0
    agent_id: str = ""
    title: str = ""
    description: str = ""
    is_pinned: bool = False
    parent_session_id: str = ""
    forked_from_message_id: str = ""
    last_request_state: dict[str, object] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(slots=True)
class InFlight:
    """A generation a server started and has not finished (see :meth:`SQLiteSessionStore.begin_generation`)."""

    session_id: str
    message_id: str
    request_id: str
    user_id: str
    tenant_id: int
    query: str
    host: str
    pid: int
    instance: str
    started_at: float
    heartbeat: float
    partial: str = ""
    knowledge_references: list[dict[str, object]] = field(default_factory=list)


@dataclass(slots=True)
class SessionPage:
    items: list[Session]
    total: int
    page: int
    page_size: int


def _dumps(value: object, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None


def _refs_json(refs: Iterable[SearchResult] | None) -> str:
    out = []
    for i, r in enumerate(refs or []):
        if isinstance(r, SearchResult):
            out.append(r.to_dict())
        elif isinstance(r, dict):
            out.append(SearchResult.from_dict(r).to_dict())
        else:
            raise TypeError(f"knowledge_references[{i}] is {type(r).__name__}, expected SearchResult")
    return _dumps(out, "knowledge_references")
