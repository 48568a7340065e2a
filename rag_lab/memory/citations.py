"""Which documents each answer cited (spec §9.1): counted per document for the MemoryAffinity
boost, and the documents a user keeps consulting for the asker background (§4.3.6).
:class:`DocumentCitations` is one of the parts of :class:`~rag_lab.memory.store.MemoryStore`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence

from rag_lab.memory.memory_db import MemoryDB


class DocumentCitations(MemoryDB):
    """Recording citations and reading document affinity."""

    def record_citations(
        self, user_id: str, references: Iterable[object], *, session_id: str = "", message_id: str = ""
    ) -> int:
        """Record the documents an answer cited (each document once per answer); the number of
        documents recorded. ``references`` holds SearchResults, ``(id, title)`` pairs or ids."""
        docs: dict[str, str] = {}
        for i, ref in enumerate(references):
            if isinstance(ref, str):
                kid, title = ref, ""
            elif isinstance(ref, tuple) and len(ref) == 2:
                kid, title = str(ref[0]), str(ref[1] or "")
            elif hasattr(ref, "knowledge_id"):
                kid = ref.knowledge_id
                title = getattr(ref, "knowledge_title", "") or getattr(ref, "knowledge_filename", "") or ""
            else:
                raise TypeError(f"references[{i}] is {type(ref).__name__}: expected a SearchResult, (id, title) or id")
            if kid and kid not in docs:
                docs[kid] = title
        if not docs:
            return 0
        answer_id = message_id or f"anon-{uuid.uuid4()}"
        now = time.time()
        with self._lock:
            n = 0
            for kid, title in docs.items():
                n += self._db.execute(
                    "INSERT OR IGNORE INTO citations (user_id, answer_id, knowledge_id, knowledge_title, session_id, created_at)"
                    " VALUES (?,?,?,?,?,?)",
                    (user_id, answer_id, kid, title, session_id, now),
                ).rowcount
        return n

    def document_affinity(self, user_id: str, knowledge_ids: Sequence[str]) -> dict[str, int]:
        """How many of the user's past answers cited each document (ids never cited are absent)."""
        ids = [k for k in dict.fromkeys(knowledge_ids) if k]
        out: dict[str, int] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows = self._db.execute(
                    f"SELECT knowledge_id, COUNT(*) AS n FROM citations WHERE user_id = ? AND knowledge_id IN"
                    f" ({','.join('?' * len(part))}) GROUP BY knowledge_id",
                    [user_id, *part],
                ).fetchall()
                out.update({r["knowledge_id"]: int(r["n"]) for r in rows})
        return out

    def frequent_documents(self, user_id: str, limit: int | None = None) -> list[str]:
        """Titles (or ids) of the documents cited in at least ``min_document_citations`` answers,
        most cited first."""
        n = self.documents_top_k if limit is None else limit
        with self._lock:
            rows = self._db.execute(
                "SELECT knowledge_id, MAX(knowledge_title) AS title, COUNT(*) AS n, MAX(created_at) AS last"
                " FROM citations WHERE user_id = ? GROUP BY knowledge_id HAVING n >= ?"
                " ORDER BY n DESC, last DESC, knowledge_id LIMIT ?",
                (user_id, self.min_document_citations, n),
            ).fetchall()
        return [r["title"] or r["knowledge_id"] for r in rows]
