"""A loopback fake of an OpenAI-compatible server, for tests (stdlib only).

Usage::

    with FakeOpenAIServer() as srv:
        srv.script("/v1/chat/completions", Reply.chat("Hello there", reasoning="hmm"))
        model = OpenAIChatModel("m", srv.base_url, max_retries=0)
        ...
        assert srv.requests[-1].json["model"] == "m"

* ``srv.base_url`` is ``http://127.0.0.1:PORT/v1`` (what OpenAI clients take); ``srv.root_url``
  has no ``/v1``. The server listens on an ephemeral port in a daemon thread.
* ``srv.requests`` lists every ``RecordedRequest`` (method, path, headers, body, json) in order.
* ``srv.script(path, *replies)`` queues replies for a path (``"/v1/chat/completions"``,
  ``"/v1/embeddings"``, ``"/rerank"``, ``"/v1/rerank"`` or any other). Each request to the path
  takes the next queued reply; a reply may also be a callable ``(RecordedRequest) -> Reply``.
  When a path's queue is empty the default behaviour applies:

  - ``/v1/embeddings``: deterministic bag-of-words vectors (``embedding_dim`` wide, hashed word
    counts, not normalised), so texts sharing words are close;
  - ``/v1/chat/completions``: ``"echo: <last user message text>"``, streamed when asked;
  - ``/rerank``, ``/v1/rerank``: Jina-shaped results scored by word overlap with the query;
  - anything else: 404 with an OpenAI-style error body.

Reply constructors (all take ``delay=`` seconds to wait before answering, for timeouts):

* ``Reply.json(body, status=200)`` and ``Reply.raw(text_or_bytes, status, content_type)``;
* ``Reply.error(status, message)``: an OpenAI-style ``{"error": {...}}`` body;
* ``Reply.chat(content | [pieces], reasoning="" | [pieces], finish_reason="stop", usage=...,
  drop_after=None)``: a chat completion that adapts to the request. Without ``stream`` it is
  one JSON completion (``reasoning_content`` on the message when given). With ``stream`` it is
  SSE over chunked transfer: one chunk per reasoning piece, then one per content piece, a
  finish-reason chunk, a usage chunk (when ``stream_options.include_usage``) and ``[DONE]``;
  ``drop_after=N`` cuts the connection after N events (no terminating chunk: a broken stream);
* ``Reply.sse(events, drop_after=None)``: raw SSE events (dicts are JSON-encoded, strings sent
  as the ``data`` line as they are);
* ``Reply.disconnect()``: close the socket without any response.

``srv.stop()`` (or leaving the ``with`` block) wakes delayed replies and shuts the server down.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "RecordedRequest", "Reply", "bag_of_words_vector"]


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None

    @property
    def stream(self) -> bool:
        return isinstance(self.json, dict) and bool(self.json.get("stream"))


@dataclass
class Reply:
    """A scripted reply; build one with the class-method constructors."""

    kind: str  # "body" | "chat" | "sse" | "disconnect"
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    delay: float = 0.0
    events: list[Any] = field(default_factory=list)
    drop_after: int | None = None
    # chat replies
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None

    @classmethod
    def json(cls, body: Any, status: int = 200, *, delay: float = 0.0) -> Reply:
        return cls("body", status=status, body=json.dumps(body).encode(), delay=delay)

    @classmethod
    def raw(
        cls, body: str | bytes, status: int = 200, content_type: str = "application/json", *, delay: float = 0.0
    ) -> Reply:
        data = body.encode() if isinstance(body, str) else body
        return cls("body", status=status, body=data, content_type=content_type, delay=delay)

    @classmethod
    def error(cls, status: int, message: str = "fake failure", *, delay: float = 0.0) -> Reply:
        body = {"error": {"message": message, "type": "server_error", "code": status}}
        return cls.json(body, status, delay=delay)

    @classmethod
    def chat(
        cls,
        content: str | list[str] = "",
        *,
        reasoning: str | list[str] = "",
        finish_reason: str = "stop",
        usage: dict[str, Any] | None = None,
        drop_after: int | None = None,
        delay: float = 0.0,
    ) -> Reply:
        pieces = [content] if isinstance(content, str) else list(content)
        thoughts = ([reasoning] if reasoning else []) if isinstance(reasoning, str) else list(reasoning)
        return cls(
            "chat",
            content=[p for p in pieces if p],
            reasoning=[t for t in thoughts if t],
            finish_reason=finish_reason,
            usage=usage,
            drop_after=drop_after,
            delay=delay,
        )

    @classmethod
    def sse(cls, events: list[Any], *, drop_after: int | None = None, delay: float = 0.0) -> Reply:
        return cls("sse", events=list(events), drop_after=drop_after, delay=delay)

    @classmethod
    def disconnect(cls, *, delay: float = 0.0) -> Reply:
        return cls("disconnect", delay=delay)


ReplyLike = Reply | Callable[[RecordedRequest], Reply]


def bag_of_words_vector(text: str, dim: int) -> list[float]:
    """Hashed word counts: each lower-cased word adds 1 to the dimension its md5 selects."""
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % dim] += 1.0
    if not any(vec):
        vec[0] = 1.0
    return vec


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class FakeOpenAIServer:
    """See the module docstring."""

    def __init__(self, *, embedding_dim: int = 8, host: str = "127.0.0.1") -> None:
        self.embedding_dim = embedding_dim
        #: seconds between streamed SSE events (a slow model); ``stream_reply`` answers every
        #: streamed chat request that has no scripted reply
        self.piece_delay = 0.001
        self.stream_reply: ReplyLike | None = None
        self.requests: list[RecordedRequest] = []
        self._scripts: dict[str, list[ReplyLike]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def start(self) -> FakeOpenAIServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------------------
    def script(self, path: str, *replies: ReplyLike) -> None:
        """Queue replies for ``path`` (consumed one per request, in order)."""
        with self._lock:
            self._scripts.setdefault(path, []).extend(replies)

    def pending(self, path: str) -> int:
        """How many scripted replies for ``path`` are still unused."""
        with self._lock:
            return len(self._scripts.get(path, []))

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def _next_reply(self, req: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(req)
            queue = self._scripts.get(req.path)
            scripted = queue.pop(0) if queue else None
        if scripted is None and req.stream and self.stream_reply is not None:
            scripted = self.stream_reply
        if scripted is not None:
            return scripted(req) if callable(scripted) and not isinstance(scripted, Reply) else scripted
        return self._default_reply(req)

    def _default_reply(self, req: RecordedRequest) -> Reply:
        body = req.json if isinstance(req.json, dict) else {}
        if req.path == "/v1/embeddings":
            inputs = body.get("input", [])
            inputs = [inputs] if isinstance(inputs, str) else list(inputs)
            data = [
                {"object": "embedding", "index": i, "embedding": bag_of_words_vector(str(t), self.embedding_dim)}
                for i, t in enumerate(inputs)
            ]
            n = sum(len(str(t).split()) for t in inputs)
            return Reply.json(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", ""),
                    "usage": {"prompt_tokens": n, "total_tokens": n},
                }
            )
        if req.path == "/v1/chat/completions":
            last = ""
            for msg in body.get("messages", []):
                if msg.get("role") == "user":
                    content = msg.get("content", "")
                    if isinstance(content, list):
                        content = " ".join(p.get("text", "") for p in content if p.get("type") == "text")
                    last = content
            return Reply.chat("echo: " + last)
        if req.path in ("/rerank", "/v1/rerank"):
            query = _words(str(body.get("query", "")))
            docs = body.get("documents", body.get("texts", []))
            results = []
            for i, doc in enumerate(docs):
                words = _words(str(doc))
                score = len(query & words) / len(query | words) if query | words else 0.0
                results.append({"index": i, "relevance_score": score})
            results.sort(key=lambda r: (-r["relevance_score"], r["index"]))
            top_n = body.get("top_n")
            if isinstance(top_n, int):
                results = results[:top_n]
            return Reply.json({"model": body.get("model", ""), "results": results})
        return Reply.error(404, f"no route for {req.path}")

    # -- HTTP ------------------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # silence stderr
                return

            def do_GET(self) -> None:
                self._handle()

            def do_POST(self) -> None:
                self._handle()

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = None
                path = self.path.split("?", 1)[0]
                req = RecordedRequest(self.command, path, {k.lower(): v for k, v in self.headers.items()}, raw, parsed)
                reply = server._next_reply(req)
                if reply.delay and server._stopping.wait(reply.delay):
                    self.close_connection = True
                    return
                try:
                    self._send(req, reply)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def _send(self, req: RecordedRequest, reply: Reply) -> None:
                if reply.kind == "disconnect":
                    self._cut()
                elif reply.kind == "body":
                    self._send_body(reply.status, reply.body, reply.content_type)
                elif reply.kind == "sse":
                    self._send_sse(reply.events, reply.drop_after)
                elif req.stream:
                    self._send_sse(self._chat_events(req, reply), reply.drop_after)
                else:
                    self._send_body(200, json.dumps(self._chat_completion(req, reply)).encode(), "application/json")

            def _send_body(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def _send_sse(self, events: list[Any], drop_after: int | None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for n, event in enumerate(events):
                    if drop_after is not None and n >= drop_after:
                        self._cut()
                        return
                    data = event if isinstance(event, str) else json.dumps(event)
                    self._chunk(f"data: {data}\n\n".encode())
                    time.sleep(server.piece_delay)
                if drop_after is not None and drop_after <= len(events):
                    self._cut()
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def _cut(self) -> None:
                self.wfile.flush()
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            @staticmethod
            def _usage(reply: Reply) -> dict[str, Any]:
                if reply.usage is not None:
                    return reply.usage
                completion = sum(len(p.split()) for p in reply.content + reply.reasoning)
                return {"prompt_tokens": 10, "completion_tokens": completion, "total_tokens": 10 + completion}

            def _chat_completion(self, req: RecordedRequest, reply: Reply) -> dict[str, Any]:
                message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.content)}
                if reply.reasoning:
                    message["reasoning_content"] = "".join(reply.reasoning)
                return {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": (req.json or {}).get("model", ""),
                    "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
                    "usage": self._usage(reply),
                }

            def _chat_events(self, req: RecordedRequest, reply: Reply) -> list[Any]:
                model = (req.json or {}).get("model", "")

                def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                    return {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }

                events: list[Any] = [chunk({"role": "assistant", "content": ""})]
                events += [chunk({"reasoning_content": r}) for r in reply.reasoning]
                events += [chunk({"content": c}) for c in reply.content]
                events.append(chunk({}, reply.finish_reason))
                options = (req.json or {}).get("stream_options") or {}
                if options.get("include_usage"):
                    events.append(
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": model,
                            "choices": [],
                            "usage": self._usage(reply),
                        }
                    )
                events.append("[DONE]")
                return events

        return Handler
