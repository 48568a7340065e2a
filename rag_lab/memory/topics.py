"""The topic words of a user's questions: words seen in several questions are the user's
long-term interests, shown in the asker background (§4.3.6); counting them is the rule-based
background extraction scheduled after each answer (§9.1). :class:`TopicInterests` is one of the
parts of :class:`~rag_lab.memory.store.MemoryStore`.
"""

from __future__ import annotations

import time

from rag_lab.memory.extract import query_topics
from rag_lab.memory.memory_db import MemoryDB


class TopicInterests(MemoryDB):
    """Counting question topics and reading interests."""

    def observe_query(self, user_id: str, query: str) -> list[str]:
        """Count the topic words of one question (each once); the words counted."""
        terms = query_topics(query)
        now = time.time()
        with self._lock:
            for t in terms:
                self._db.execute(
                    "INSERT INTO topics (user_id, term, count, last_seen) VALUES (?,?,1,?)"
                    " ON CONFLICT(user_id, term) DO UPDATE SET count = count + 1, last_seen = excluded.last_seen",
                    (user_id, t, now),
                )
        return terms

    def interests(self, user_id: str, limit: int | None = None) -> list[str]:
        """Topic words seen in at least ``min_topic_queries`` questions, most frequent first."""
        n = self.interests_top_k if limit is None else limit
        with self._lock:
            rows = self._db.execute(
                "SELECT term FROM topics WHERE user_id = ? AND count >= ? ORDER BY count DESC, last_seen DESC, term LIMIT ?",
                (user_id, self.min_topic_queries, n),
            ).fetchall()
        return [r["term"] for r in rows]

    def extract_background(self, user_id: str, query: str, answer: str = "") -> None:
        """The background extraction scheduled after each answer (§9.1): rule-based, it tallies
        the question's topics (no model call)."""
        if query.strip():
            self.observe_query(user_id, query)
