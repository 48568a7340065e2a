"""Bus events → stored StreamEvents (spec §8.2), one handler per request."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from rag_lab.stream.bus import BusEvent, BusEventType, EventBus
from rag_lab.stream.manager import StreamManager
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import ResponseType, StreamEvent

log = logging.getLogger(__name__)


def _ref_dict(r: SearchResult | Mapping[str, object]) -> dict[str, object]:
    return r.to_dict() if isinstance(r, SearchResult) else dict(r)


class AgentStreamHandler:
    """Subscribes to a request's bus and appends what it sees to the StreamManager."""

    def __init__(self, manager: StreamManager, session_id: str, message_id: str) -> None:
        self.manager = manager
        self.session_id = session_id
        self.message_id = message_id
        self.references: list[dict[str, object]] = []
        self.answer_text = ""
        self._first_chunk_at: dict[str, float] = {}
        self._tool_started: dict[str, float] = {}
        #: appends the StreamManager refused (e.g. Redis down past its retry window)
        self.append_failures = 0
        #: when True the terminal ``complete`` event is kept in :attr:`held` instead of stored:
        #: the caller stores it once the turn is saved, so that a reader who sees ``complete``
        #: and then reads the session finds the assistant message
        self.hold_complete = False
        self.held: list[StreamEvent] = []

    def subscribe(self, bus: EventBus) -> None:
        bus.on_any(self.handle)

    def _append(self, ev: StreamEvent) -> None:
        """Store one event. A store failure is logged and counted, never raised: the answer must
        not die because a reader-side store is briefly unavailable (the event is lost)."""
        try:
            self.manager.append_event(self.session_id, self.message_id, ev)
        except Exception as exc:
            self.append_failures += 1
            log.warning("stream %s/%s: could not store a %s event: %s", self.session_id, self.message_id, ev.type, exc)

    def _timed(self, ev: BusEvent, done: bool, data: dict[str, object]) -> dict[str, object]:
        now = time.time()
        first = self._first_chunk_at.setdefault(ev.id, now)
        if done:
            data["duration_ms"] = int((now - first) * 1000)
            data["completed_at"] = int(now)
        return data

    def handle(self, ev: BusEvent) -> None:
        d = ev.data
        t = ev.type
        if t == BusEventType.THOUGHT:
            done = bool(d.get("done"))
            data = self._timed(ev, done, {"event_id": ev.id})
            self._append(StreamEvent(ev.id, ResponseType.THINKING.value, str(d.get("content", "")), done, data=data))
        elif t == BusEventType.TOOL_CALL:
            self._tool_started[str(d.get("tool_call_id", ""))] = time.time()
            data = {
                "tool_name": d.get("tool_name"),
                "arguments": d.get("arguments"),
                "tool_call_id": d.get("tool_call_id"),
            }
            self._append(
                StreamEvent(
                    ev.id, ResponseType.TOOL_CALL.value, f"Calling tool: {d.get('tool_name')}", False, data=data
                )
            )
        elif t == BusEventType.TOOL_RESULT:
            self._tool_result(ev)
        elif t == BusEventType.REFERENCES:
            self.references.extend(_ref_dict(r) for r in d.get("references") or [])
            self._append(
                StreamEvent(ev.id, ResponseType.REFERENCES.value, "", False, data={"references": list(self.references)})
            )
        elif t == BusEventType.MEMORY_RECALLED:
            self._append(
                StreamEvent(ev.id, ResponseType.MEMORY_RECALLED.value, "", False, data={"memories": d.get("memories")})
            )
        elif t == BusEventType.FINAL_ANSWER:
            done = bool(d.get("done"))
            content = str(d.get("content", ""))
            self.answer_text += content
            data = self._timed(ev, done, {"event_id": ev.id})
            if d.get("is_fallback"):
                data["is_fallback"] = True
            for key in ("truncated", "finish_reason", "usage", "model_error"):
                if d.get(key):
                    data[key] = d[key]
            self._append(StreamEvent(ev.id, ResponseType.ANSWER.value, content, done, data=data))
        elif t == BusEventType.ERROR:
            err = str(d.get("error", ""))
            self._append(
                StreamEvent(ev.id, ResponseType.ERROR.value, err, True, data={"stage": d.get("stage"), "error": err})
            )
        elif t == BusEventType.SESSION_TITLE:
            self._append(
                StreamEvent(ev.id, ResponseType.SESSION_TITLE.value, str(d.get("title", "")), True, data=dict(d))
            )
        elif t == BusEventType.AGENT_COMPLETE:
            final = str(d.get("final_answer") or "")
            if not self.answer_text and final:
                fid = f"answer-fallback-{int(time.time() * 1000)}"
                self._append(StreamEvent(fid, ResponseType.ANSWER.value, final, False, data={"event_id": fid}))
                self._append(StreamEvent(fid, ResponseType.ANSWER.value, "", True, data={"event_id": fid}))
            data = {"total_steps": d.get("total_steps", 0), "total_duration_ms": d.get("total_duration_ms", 0)}
            complete = StreamEvent(ev.id, ResponseType.COMPLETE.value, "", True, data=data)
            if self.hold_complete:
                self.held.append(complete)
            else:
                self._append(complete)

    def _tool_result(self, ev: BusEvent) -> None:
        d = ev.data
        call_id = str(d.get("tool_call_id", ""))
        started = self._tool_started.get(call_id)
        duration = int((time.time() - started) * 1000) if started else int(d.get("duration_ms") or 0)
        success = bool(d.get("success"))
        result_data = dict(d.get("data") or {})
        data: dict[str, object] = {
            "tool_name": d.get("tool_name"),
            "success": success,
            "error": d.get("error", ""),
            "duration_ms": duration,
            "tool_call_id": call_id,
        }
        data.update({k: v for k, v in result_data.items() if k not in data})
        if "display_type" not in result_data:
            data["output"] = d.get("output", "")
        if not success:
            self._append(StreamEvent(ev.id, ResponseType.ERROR.value, str(d.get("error", "")), False, data=data))
            return
        content = "" if "display_type" not in result_data else str(d.get("output", ""))[:200]
        self._append(StreamEvent(ev.id, ResponseType.TOOL_RESULT.value, content, False, data=data))
