"""The SQLite file of a :class:`~rag_lab.memory.store.MemoryStore`: its schema (notes, citations,
topics, all keyed by user), the connection behind one lock, the settings of recall and of the
asker background, and what applies to every table (a user's counts, forgetting a user).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.blobstore import use_wal

if TYPE_CHECKING:
    from rag_lab.models.base import Embedder

SCHEMA_VERSION = 1


_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    content TEXT NOT NULL,
    norm_content TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'fact',
    importance INTEGER NOT NULL DEFAULT 3,
    model_key TEXT NOT NULL,
    dim INTEGER NOT NULL,
    embedding BLOB NOT NULL,
    source_session_id TEXT NOT NULL DEFAULT '',
    source_message_id TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (user_id, norm_content)
);
CREATE TABLE IF NOT EXISTS citations (
    user_id TEXT NOT NULL,
    answer_id TEXT NOT NULL,
    knowledge_id TEXT NOT NULL,
    knowledge_title TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    PRIMARY KEY (user_id, answer_id, knowledge_id)
);
CREATE INDEX IF NOT EXISTS citations_by_doc ON citations(user_id, knowledge_id);
CREATE TABLE IF NOT EXISTS topics (
    user_id TEXT NOT NULL,
    term TEXT NOT NULL,
    count INTEGER NOT NULL,
    last_seen REAL NOT NULL,
    PRIMARY KEY (user_id, term)
);
"""


class MemoryDB:
    """The connection, its lock, the embedder and the settings (thread-safe)."""

    def __init__(
        self,
        path: str | Path,
        embedder: Embedder,
        *,
        recall_top_k: int = 5,
        min_score: float = 0.3,
        background_top_k: int = 3,
        interests_top_k: int = 5,
        documents_top_k: int = 5,
        min_topic_queries: int = 2,
        min_document_citations: int = 2,
    ) -> None:
        for name, value in (
            ("recall_top_k", recall_top_k),
            ("background_top_k", background_top_k),
            ("interests_top_k", interests_top_k),
            ("documents_top_k", documents_top_k),
            ("min_topic_queries", min_topic_queries),
            ("min_document_citations", min_document_citations),
        ):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"MemoryStore: {name} must be an integer >= 0, got {value!r}")
        if not -1.0 <= min_score <= 1.0:
            raise ValueError(f"MemoryStore: min_score must be in [-1, 1], got {min_score!r}")
        self.path = str(path)
        if self.path != ":memory:" and not Path(self.path).parent.is_dir():
            raise FileNotFoundError(f"{self.path}: folder {Path(self.path).parent} does not exist")
        self.embedder = embedder
        self.recall_top_k, self.min_score = recall_top_k, min_score
        self.background_top_k, self.interests_top_k, self.documents_top_k = (
            background_top_k,
            interests_top_k,
            documents_top_k,
        )
        self.min_topic_queries, self.min_document_citations = min_topic_queries, min_document_citations
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            if self.path != ":memory:":
                use_wal(self._db, 5.0)  # sqlite3.connect's default busy timeout
                # WAL + NORMAL (as the knowledge store): a commit survives a crash of the process; only a power
                # loss may undo the last ones. FULL synced every message (~8 ms, most of lab.ask's overhead).
                self._db.execute("PRAGMA synchronous = NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ValueError(f"{self.path}: memory schema version {version}, this code reads {SCHEMA_VERSION}")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path}: not a usable memory database: {exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def clear(self, user_id: str) -> None:
        """Forget everything about a user (notes, citations, topics)."""
        with self._lock:
            for table in ("memories", "citations", "topics"):
                self._db.execute(f"DELETE FROM {table} WHERE user_id = ?", (user_id,))

    def stats(self, user_id: str) -> dict[str, int]:
        with self._lock:
            return {
                t: int(self._db.execute(f"SELECT COUNT(*) FROM {t} WHERE user_id = ?", (user_id,)).fetchone()[0])
                for t in ("memories", "citations", "topics")
            }

    def __repr__(self) -> str:
        return f"MemoryStore({self.path!r}, embedder={getattr(self.embedder, 'model_key', '?')!r})"
