"""The generations in flight (crash recovery): a server process records each answer it starts,
refreshes the records with the answer so far, and deletes them when done; a server that finds the
record of a dead process finishes its message (:mod:`rag_lab.stream.recovery`).
:class:`InFlightLog` is one of the parts of
:class:`~rag_lab.session.sqlite_store.SQLiteSessionStore`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

from rag_lab.session.session_db import SessionDB
from rag_lab.session.sqlite_schema import InFlight, _dumps


class InFlightLog(SessionDB):
    """The ``in_flight`` table: begin, heartbeat, end, list."""

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

    def heartbeat_generations(
        self, instance: str, partials: Mapping[tuple[str, str], tuple[str, Sequence[object]]]
    ) -> None:
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
