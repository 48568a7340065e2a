"""The server's event loop never waits on the Redis log: the pipeline's appends run in order on
one background thread (:class:`~rag_lab.stream.appender.OrderedAppender`), a process reads its own
writes, failures are counted, and SSE keep-alive comments are sent whenever no frame went out for
``keepalive_s`` (from the start of the response, so between events too)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import httpx
import pytest

from rag_lab.stream.appender import OrderedAppender
from rag_lab.stream.manager import MemoryStreamManager
from rag_lab.types.stream import StreamEvent

Q = "Who built the lighthouse?"


class _Spy(MemoryStreamManager):
    """A memory log that records the thread of every append (and can fail some)."""

    def __init__(self, fail_on: set[str] | None = None) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.fail_on = fail_on or set()

    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        self.threads.append(threading.current_thread().name)
        if event.id in self.fail_on:
            raise ConnectionError("redis down")
        super().append_event(session_id, message_id, event)


def _ev(i: int, kind: str = "answer") -> StreamEvent:
    return StreamEvent(f"e{i}", kind, str(i), False)


def test_appends_from_the_event_loop_run_on_the_writer_thread_in_order() -> None:
    spy = _Spy()
    app = OrderedAppender(spy)

    async def produce() -> str:
        for i in range(300):
            app.append_event("s", "a" if i % 2 else "b", _ev(i))  # two streams, interleaved
        return threading.current_thread().name

    loop_thread = asyncio.run(produce())
    a, _ = app.get_events("s", "a")  # waits for this stream's queued writes
    b, _ = app.get_events("s", "b")
    assert [e.content for e in a] == [str(i) for i in range(1, 300, 2)]
    assert [e.content for e in b] == [str(i) for i in range(0, 300, 2)]
    assert loop_thread not in spy.threads and {t.split("_")[0] for t in spy.threads} == {"rag"}
    assert all(t.startswith("rag_lab-stream-append") for t in spy.threads) and app.writes == 300
    app.close()


def test_a_failed_write_is_counted_and_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    app = OrderedAppender(_Spy(fail_on={"e1"}))
    with caplog.at_level(logging.WARNING, logger="rag_lab.stream.appender"):
        for i in range(3):
            app.append_event("s", "m", _ev(i))  # never raises into the pipeline
        events, nxt = app.get_events("s", "m")
    assert [e.content for e in events] == ["0", "2"] and nxt == 2
    assert app.failures == 1 and "could not store a answer event: redis down" in caplog.text
    with pytest.raises(ConnectionError):  # the server's own writes (stop) learn of the failure
        app.submit("s", "m", StreamEvent("e1", "stop", "", True)).result()
    assert app.pending("s", "m") is None  # nothing left queued
    app.close()


def test_the_server_wraps_a_remote_log_and_streams_in_order(serve: Any, paced: Any) -> None:
    """A non-memory manager (a spy standing in for Redis) is wrapped: the answer's events are
    written by the writer thread, never by the server's loop, and reach the client in order."""

    inner = MemoryStreamManager()
    threads: list[str] = []

    class Remote:
        def append_event(self, s: str, m: str, e: StreamEvent) -> None:
            threads.append(threading.current_thread().name)
            inner.append_event(s, m, e)

        def get_events(self, s: str, m: str, off: int = 0) -> Any:
            return inner.get_events(s, m, off)

    srv = serve(manager=Remote())
    service = srv.app.state.service
    assert isinstance(service.manager, OrderedAppender)
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{srv.url}/knowledge-chat/s-loop", json={"query": Q, "kb": "demo"})
        mid = r.headers["x-message-id"]
        health = c.get(f"{srv.url}/health").json()
    assert r.status_code == 200 and health["stream_manager"] == "Remote"
    sent = [f for f in r.text.split("\n\n") if f.startswith("event:message")]
    stored, _ = service.manager.get_events("s-loop", mid)
    assert len(sent) >= len([e for e in stored if e.type != "stop"]) > 3
    assert threads and all(t.startswith("rag_lab-stream-append") for t in threads), set(threads)


def test_keepalive_comments_flow_between_events(serve: Any, paced: Any) -> None:
    paced.delay_s = 0.25  # each answer chunk waits: gaps between events
    srv = serve(keepalive_s=0.05, poll_interval_s=0.02)
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{srv.url}/knowledge-chat/s-keep", json={"query": Q, "kb": "demo"})
    parts = [p for p in r.text.split("\n\n") if p]
    kinds = ["keepalive" if p == ": keep-alive" else "frame" for p in parts]
    assert "keepalive" in kinds and kinds[-1] == "frame"
    first_answer = next(i for i, p in enumerate(parts) if '"response_type":"answer"' in p)
    later = [i for i, k in enumerate(kinds) if k == "keepalive" and i > first_answer]
    assert later, "no keep-alive between answer events"
    assert all(p.startswith("event:message\ndata:") for p, k in zip(parts, kinds) if k == "frame")
    off = serve(keepalive_s=0, poll_interval_s=0.02)
    with httpx.Client(timeout=30) as c:
        r2 = c.post(f"{off.url}/knowledge-chat/s-keep0", json={"query": Q, "kb": "demo"})
    assert ": keep-alive" not in r2.text


class _BusyModel:
    """Wraps the lab's model: before its first chunk it holds the CPU in Python, without an await,
    until ``release`` is set (at most 5 s), like a stage's long pure-Python work."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.busy = threading.Event()
        self.release = threading.Event()
        self.spun = threading.Event()  # set when the busy spell ends (released or timed out)
        self.threads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def chat(self, messages: Any, options: Any = None) -> Any:
        return await self.inner.chat(messages, options)

    async def chat_stream(self, messages: Any, options: Any = None) -> Any:
        import time

        self.threads.append(threading.current_thread().name)
        self.busy.set()
        deadline = time.monotonic() + 5
        while not self.release.is_set() and time.monotonic() < deadline:
            sum(range(2000))  # no await: the loop running this coroutine serves nothing else
        self.spun.set()
        async for chunk in self.inner.chat_stream(messages, options):
            yield chunk


@pytest.fixture
def busy_model(stream_lab: Any) -> Any:
    from rag_lab.lab.lab import CHAT_MODEL_ID

    models = stream_lab.services.chat_models
    original = models[CHAT_MODEL_ID]
    busy = _BusyModel(original)
    models[CHAT_MODEL_ID] = busy
    yield busy
    busy.release.set()
    models[CHAT_MODEL_ID] = original


def _ask_while_busy(srv: Any, busy: _BusyModel, session: str) -> tuple[bool, httpx.Response]:
    """Starts an ask, waits until its model holds the CPU, then asks ``/health``; returns whether
    /health was answered while the model still held it, and the ask's response."""
    box: dict[str, Any] = {}

    def ask() -> None:
        with httpx.Client(timeout=60) as c:
            box["r"] = c.post(f"{srv.url}/knowledge-chat/{session}", json={"query": Q, "kb": "demo"})

    t = threading.Thread(target=ask)
    t.start()
    assert busy.busy.wait(30), "the model was never called"
    with httpx.Client(timeout=60) as c:
        health = c.get(f"{srv.url}/health")
    answered_while_busy = health.status_code == 200 and not busy.spun.is_set()
    busy.release.set()
    t.join(60)
    return answered_while_busy, box["r"]


def test_health_is_served_while_a_generation_holds_the_cpu(serve: Any, busy_model: _BusyModel) -> None:
    """Generations run on the pipeline's own loop thread: the server's loop answers /health while
    a generation does Python work without awaiting, and the answer still streams to the end."""
    srv = serve()
    answered, r = _ask_while_busy(srv, busy_model, "s-busy")
    assert answered, "/health waited for the generation's Python work"
    assert r.status_code == 200 and '"response_type":"complete"' in r.text
    assert busy_model.threads == ["rag-lab-pipeline"]


def test_on_the_servers_loop_health_waits_for_the_generation(serve: Any, busy_model: _BusyModel) -> None:
    """The previous design (``pipeline_thread=False``), which the test above guards against: the
    generation runs on the server's loop and /health is answered only after the model lets go."""
    srv = serve(pipeline_thread=False)
    answered, r = _ask_while_busy(srv, busy_model, "s-busy-loop")
    assert not answered
    assert r.status_code == 200 and busy_model.threads != ["rag-lab-pipeline"]
