"""The SSE wire format of the chat server (spec §8.3): the stored event as a ``StreamResponse``,
Go-compatible compact JSON, the ``event:message`` frame, the response headers, and the timings of
the SSE layer (:class:`StreamServerSettings`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from rag_lab.stream.redis_manager import json_default
from rag_lab.types.params import PipelineParams
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType, StreamEvent, StreamResponse

#: spec §11.4 defaults, from PipelineParams
_P = PipelineParams.model_fields
SSE_POLL_INTERVAL_S: float = _P["sse_poll_interval_ms"].default / 1000
STOP_WATCH_INTERVAL_S: float = _P["stop_watch_interval_ms"].default / 1000
STOP_WATCH_MAX_S: float = _P["stop_watch_max_s"].default

SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}
STOPPED_CONTENT = "Generation stopped by user"
_TERMINAL = {ResponseType.COMPLETE.value, STOP_RESPONSE_TYPE}


@dataclass
class StreamServerSettings:
    """Timings of the SSE layer. The first three are the spec's; the rest are ours."""

    poll_interval_s: float = SSE_POLL_INTERVAL_S
    stop_watch_interval_s: float = STOP_WATCH_INTERVAL_S
    stop_watch_max_s: float = STOP_WATCH_MAX_S
    #: a follower without a local generation ends this long after an error with nothing newer
    error_grace_s: float = 5.0
    #: a follower without a local generation ends after this long without any new event
    idle_timeout_s: float = 600.0
    #: POST /stop waits this long for a local generation to flush before writing ``stop`` (readers
    #: end on it, so this bounds how long a reader of a stopped message waits)
    stop_wait_s: float = 0.5
    #: running generations refresh their crash-recovery record (and answer so far) this often
    heartbeat_s: float = 1.0
    #: a record of another host whose heartbeat is older than this is finished by this server
    orphan_after_s: float = 15.0
    #: finished generations are forgotten this long after they end (the log keeps their events)
    keep_finished_s: float = 600.0
    #: an SSE comment (``: keep-alive``) is sent after this long without a frame, from the start
    #: of the response on, so clients and proxies with a read timeout do not drop a slow first
    #: event (a search over a large KB, a model that thinks); 0 disables
    keepalive_s: float = 15.0
    #: generations run on their own event loop in a background thread
    #: (:mod:`rag_lab.stream.pipeline_loop`), so their Python work never delays ``/health``, asks,
    #: stops or SSE frames; False runs them on the server's loop (the previous design, measured
    #: side by side in ``benchmarks/server_loop.py``)
    pipeline_thread: bool = True

    @classmethod
    def from_params(cls, params: PipelineParams) -> StreamServerSettings:
        """The spec's timings from the lab's PipelineParams."""
        return cls(
            poll_interval_s=params.sse_poll_interval_ms / 1000,
            stop_watch_interval_s=params.stop_watch_interval_ms / 1000,
            stop_watch_max_s=params.stop_watch_max_s,
        )


# -- frames ----------------------------------------------------------------------------------


def build_stream_response(event: StreamEvent, request_id: str) -> StreamResponse:
    """A stored event as the SSE payload (§8.3): the request id as ``id``, data copied,
    ``agent_query`` ids and ``references`` lifted; a stored ``stop`` becomes the stop notice."""
    kind = str(event.type)
    if kind == STOP_RESPONSE_TYPE:
        return StreamResponse(id=request_id, response_type=STOP_RESPONSE_TYPE, content=STOPPED_CONTENT, done=True)
    data = dict(event.data or {})
    resp = StreamResponse(id=request_id, response_type=kind, content=event.content, done=event.done, data=data)
    if kind == ResponseType.AGENT_QUERY.value:
        resp.session_id = str(data.get("session_id") or "")
        resp.assistant_message_id = str(data.get("assistant_message_id") or "")
    elif kind == ResponseType.REFERENCES.value:
        resp.knowledge_references = list(data.get("references") or [])
    return resp


def encode_json(obj: object) -> str:
    """Compact JSON with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as Go's encoder does."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=json_default)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


#: an SSE comment line: clients ignore it (the EventSource spec), proxies see traffic
KEEPALIVE_FRAME = b": keep-alive\n\n"


def sse_frame(resp: StreamResponse) -> bytes:
    """``event:message\\ndata:<json>\\n\\n`` (no space after the colons, §8.3)."""
    return f"event:message\ndata:{encode_json(resp.to_dict())}\n\n".encode()


# -- errors ----------------------------------------------------------------------------------
