"""Finishing messages whose server died mid-answer (``kill -9``, a crash, a lost machine).

Every generation a server starts is recorded in the session store (``in_flight`` in
``sessions.sqlite``: who started it, the host, pid and server instance, a heartbeat and the answer
so far, refreshed every second). A record is **orphaned** when no live server can still finish it:

* its instance ran in this very process and is gone (an app restarted in-process);
* it ran on this host and that process is dead, or
* its heartbeat is older than ``orphan_after_s`` (another host, or a hung process).

A server finishes each orphan at start-up (before it accepts requests) and then every few
seconds: it appends a terminal ``error`` (``stage: server_restart``) and ``complete`` to the
message's event log — rebuilding the head of the log from the record when the log itself was
lost (memory backend) — and saves the partial answer (the longer of the log's and the record's)
with its references as the assistant message, marked ``extra.interrupted``. Readers then end
at once instead of waiting for an answer that will never come.

For a finished message whose log is gone (memory backend after a restart, or expired),
:func:`events_from_message` rebuilds a replay from the saved assistant message, so
continue-stream answers it instead of 404.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rag_lab.stream.manager import answer_text
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent

if TYPE_CHECKING:
    from rag_lab.session.sqlite_schema import InFlight
    from rag_lab.session.sqlite_store import SQLiteSessionStore
    from rag_lab.session.store import Message
    from rag_lab.stream.manager import StreamManager

log = logging.getLogger(__name__)

INTERRUPTED_TEXT = "The server stopped before this answer was finished; the partial answer above is kept."
#: server instances alive in this process (an in-process restart leaves the old one's records)
LIVE_INSTANCES: set[str] = set()
HOST = socket.gethostname()


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_orphan(row: InFlight, now: float, orphan_after_s: float) -> bool:
    """See the module docstring."""
    if row.instance in LIVE_INSTANCES:
        return False
    if row.host == HOST:
        if row.pid == os.getpid():
            return True
        if not pid_alive(row.pid):
            return True
    return bool(now - row.heartbeat > orphan_after_s)


def _references(events: list[StreamEvent]) -> list[dict[str, object]] | None:
    for e in reversed(events):
        if e.type == ResponseType.REFERENCES.value:
            return list((e.data or {}).get("references") or [])
    return None


def finish_orphan(manager: StreamManager, sessions: SQLiteSessionStore, row: InFlight) -> str:
    """Terminate one orphaned message (log and session store); returns what was done."""
    sid, mid = row.session_id, row.message_id
    try:
        events, _ = manager.get_events(sid, mid, 0)
    except Exception as exc:  # the log is unreachable now: try again on the next sweep
        log.warning("recovery of %s/%s postponed: cannot read its stream: %s", sid, mid, exc)
        return "postponed"
    kinds = {e.type for e in events}
    log_text = answer_text(events)
    partial = log_text if len(log_text) >= len(row.partial or "") else row.partial
    refs = _references(events)
    refs = refs if refs is not None else list(row.knowledge_references or [])
    done = ResponseType.COMPLETE.value in kinds or STOP_RESPONSE_TYPE in kinds
    if not done:
        new: list[StreamEvent] = []
        if not events:  # the log itself was lost: rebuild its head from the record
            new.append(_agent_query(sid, mid))
            if refs:
                new.append(
                    StreamEvent(f"{mid[:8]}-references", ResponseType.REFERENCES.value, data={"references": refs})
                )
            if partial:
                new.append(
                    StreamEvent(f"{mid[:8]}-answer", ResponseType.ANSWER.value, partial, False, data={"event_id": mid})
                )
        elif len(partial) > len(log_text) and partial.startswith(log_text):
            rest = partial[len(log_text) :]  # saved by the heartbeat, lost from the log
            new.append(StreamEvent(f"{mid[:8]}-answer", ResponseType.ANSWER.value, rest, False, data={"event_id": mid}))
        new.append(
            StreamEvent(
                f"{mid[:8]}-interrupted",
                ResponseType.ERROR.value,
                INTERRUPTED_TEXT,
                True,
                data={"stage": "server_restart", "error": INTERRUPTED_TEXT, "interrupted": True},
            )
        )
        new.append(
            StreamEvent(
                f"{mid[:8]}-complete",
                ResponseType.COMPLETE.value,
                "",
                True,
                data={"total_steps": 0, "total_duration_ms": 0, "interrupted": True},
            )
        )
        try:
            for e in new:
                manager.append_event(sid, mid, e)
        except Exception as exc:
            log.warning("recovery of %s/%s postponed: cannot write its stream: %s", sid, mid, exc)
            return "postponed"
    saved = "kept"
    if sessions.find_message(sid, mid) is None:
        saved = "saved" if _save_answer(sessions, sid, mid, partial, refs, {"interrupted": True}) else "session gone"
    sessions.end_generation(sid, mid)
    log.warning(
        "finished orphaned message %s/%s (server %s pid %s): %d characters of answer %s",
        sid,
        mid,
        row.host,
        row.pid,
        len(partial),
        saved,
    )
    return "finished" if not done else "closed"


def settle_turn(
    sessions: SQLiteSessionStore,
    session_id: str,
    message_id: str,
    *,
    error: str = "",
    partial: str = "",
    references: Iterable[dict[str, object]] = (),
) -> str:
    """Close a generation of this server: a failed one (``error``) whose user message is stored
    and whose answer is not gets an assistant message with the answer so far, completed and
    marked ``extra.error`` with the cause; then its in-flight record goes. Raises when the store
    cannot be reached (the caller tries again later); returns what was done."""
    done = "ended"
    if (
        error
        and sessions.find_message(session_id, message_id) is None
        and sessions.find_message(session_id, message_id, role="user") is not None
    ):
        saved = _save_answer(sessions, session_id, message_id, partial, references, {"error": error})
        done = "saved failed" if saved else "session gone"
    sessions.end_generation(session_id, message_id)
    return done


def _save_answer(
    sessions: SQLiteSessionStore,
    sid: str,
    mid: str,
    text: str,
    refs: Iterable[dict[str, object]],
    extra: dict[str, object],
) -> bool:
    """The assistant message of an answer the server ends itself (completed, with ``extra``);
    False when the session was deleted meanwhile."""
    try:
        sessions.add_message(
            sid,
            "assistant",
            text,
            mid,
            knowledge_references=[SearchResult.from_dict(r) for r in refs],
            is_completed=True,
            extra=extra,
        )
    except KeyError:
        return False
    return True


def recover_orphans(
    manager: StreamManager, sessions: SQLiteSessionStore, orphan_after_s: float, now: float | None = None
) -> int:
    """Finish every orphaned generation record; the number finished."""
    now = time.time() if now is None else now
    n = 0
    for row in sessions.list_generations():
        if is_orphan(row, now, orphan_after_s) and finish_orphan(manager, sessions, row) != "postponed":
            n += 1
    return n


def _agent_query(session_id: str, message_id: str) -> StreamEvent:
    return StreamEvent(
        f"query-{message_id[:8]}",
        ResponseType.AGENT_QUERY.value,
        "",
        True,
        data={"session_id": session_id, "assistant_message_id": message_id},
    )


def events_from_message(session_id: str, message_id: str, message: Message) -> list[StreamEvent]:
    """A replay of a finished message whose log is gone, from its saved assistant message."""
    out = [_agent_query(session_id, message_id)]
    refs = [r.to_dict() for r in message.knowledge_references]
    if refs:
        out.append(
            StreamEvent(f"{message_id[:8]}-references", ResponseType.REFERENCES.value, data={"references": refs})
        )
    data: dict[str, object] = {"event_id": message_id}
    if message.is_fallback:
        data["is_fallback"] = True
    if message.content:
        out.append(
            StreamEvent(f"{message_id[:8]}-answer", ResponseType.ANSWER.value, message.content, False, data=data)
        )
    out.append(StreamEvent(f"{message_id[:8]}-answer", ResponseType.ANSWER.value, "", True, data=dict(data)))
    if (message.extra or {}).get("interrupted"):
        out.append(
            StreamEvent(
                f"{message_id[:8]}-interrupted",
                ResponseType.ERROR.value,
                INTERRUPTED_TEXT,
                True,
                data={"stage": "server_restart", "error": INTERRUPTED_TEXT, "interrupted": True},
            )
        )
    out.append(
        StreamEvent(f"{message_id[:8]}-complete", ResponseType.COMPLETE.value, "", True, data={"replayed": True})
    )
    for e in out:
        e.stamp()
    return out
