"""The chat server over real loopback sockets (uvicorn in a thread): ask with SSE, disconnect and
resume, stop, ownership, malformed requests, errors, reliability (spec §3.1, §8.3–§8.5, A.2)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

from benchmarks.stream_reliability import (
    Frame,
    frame_units,
    iter_frames,
    log_units,
    parse_frames,
    run_reliability,
)
from rag_lab.stream.redis_manager import RedisStreamManager
from tests.stream.conftest import free_port, wait_until

Q = "When was the lighthouse built?"
SSE = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-accel-buffering": "no",
}


def collapse(types: list[str]) -> list[str]:
    out: list[str] = []
    for t in types:
        if not out or out[-1] != t or t != "answer":
            out.append(t)
    return out


def answer_text(items) -> str:
    return "".join(
        (f.data.get("content", "") if isinstance(f, Frame) else f.content)
        for f in items
        if (f.type if isinstance(f, Frame) else f.type) == "answer"
    )


class LiveRead(threading.Thread):
    """Reads one ask stream to its end in the background."""

    def __init__(self, url: str, session: str, user: str = "alice", query: str = Q) -> None:
        super().__init__(daemon=True)
        self.url, self.session, self.user, self.query = url, session, user, query
        self.frames: list[Frame] = []
        self.message_id = ""
        self.started_at = time.monotonic()

    def run(self) -> None:
        with httpx.Client(timeout=30) as c:
            with c.stream(
                "POST",
                f"{self.url}/knowledge-chat/{self.session}",
                json={"query": self.query, "kb": "demo"},
                headers={"X-User-ID": self.user},
            ) as r:
                self.message_id = r.headers.get("x-message-id", "")
                for f in iter_frames(r.iter_lines()):
                    self.frames.append(f)


def stored(srv, session: str, message: str):
    return srv.service.manager.get_events(session, message, 0)[0]


def answer_events_stored(srv, session: str, message: str) -> int:
    return sum(1 for e in stored(srv, session, message) if e.type == "answer")


BACKENDS = pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)], indirect=True)


@pytest.fixture
def backend(request):
    """``backend()`` → a StreamManager of the parametrised kind (a fresh one per call)."""
    from rag_lab.stream.manager import MemoryStreamManager

    if request.param == "memory":
        return lambda: MemoryStreamManager()
    url = request.getfixturevalue("redis_url")
    return lambda: RedisStreamManager(url=url)


# -- asking ------------------------------------------------------------------------------------


def test_ask_streams_the_answer_as_sse_with_the_spec_headers_and_order(serve):
    srv = serve()
    with httpx.Client(timeout=30) as c:
        r = c.post(
            f"{srv.url}/knowledge-chat/s-order",
            json={"query": Q, "knowledge_base_ids": ["demo"]},
            headers={"X-Request-ID": "req-42", "X-User-ID": "alice"},
        )
    assert r.status_code == 200
    for name, value in SSE.items():
        assert r.headers[name] == value
    body = r.text
    raw_frames = [f for f in body.split("\n\n") if f]
    assert all(f.startswith("event:message\ndata:{") and f.count("\n") == 1 for f in raw_frames)
    assert "<" not in body and "\\u003ckb " in body  # Go's escaping of the expanded citations
    frames = [json.loads(f.split("\ndata:", 1)[1]) for f in raw_frames]
    mid = r.headers["x-message-id"]
    assert frames[0] == {
        "id": "req-42",
        "response_type": "agent_query",
        "content": "",
        "done": True,
        "session_id": "s-order",
        "assistant_message_id": mid,
        "data": {"session_id": "s-order", "assistant_message_id": mid},
        "finish_reason": "",
    }
    assert {f["id"] for f in frames} == {"req-42"}
    assert collapse([f["response_type"] for f in frames]) == [
        "agent_query",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "references",
        "answer",
        "complete",
    ]
    answers = [f for f in frames if f["response_type"] == "answer"]
    assert [a["done"] for a in answers] == [False] * (len(answers) - 1) + [True]
    assert all(a["data"]["event_id"] == answers[0]["data"]["event_id"] for a in answers)
    text = "".join(a["content"] for a in answers)
    assert "built in 1874 by the engineer Mara Quill" in text and '<kb doc="The Brightwater Lighthouse"' in text
    refs = next(f for f in frames if f["response_type"] == "references")["knowledge_references"]
    assert refs and refs[0]["knowledge_title"] == "The Brightwater Lighthouse"
    assert frame_units(frames) == log_units(stored(srv, "s-order", mid))  # the wire is the log


@BACKENDS
def test_generation_survives_a_disconnect_and_continue_stream_replays_everything(serve, paced, backend):
    """Kill the client mid-answer; the answer keeps being generated; continue-stream (on another
    replica for Redis) replays from offset 0, coalesced, and follows it to `complete`."""
    a = serve(backend())
    b = serve(backend()) if isinstance(a.service.manager, RedisStreamManager) else a
    paced.delay_s = 0.05
    with httpx.Client(timeout=30) as c:
        with c.stream("POST", f"{a.url}/knowledge-chat/s-cut", json={"query": Q, "kb": "demo"}) as r:
            mid = r.headers["x-message-id"]
            seen: list[Frame] = []
            for f in iter_frames(r.iter_lines()):
                seen.append(f)
                if f.type == "answer":
                    break
        # the connection is closed: the server notices, the generation goes on
        assert wait_until(lambda: a.service.active_followers == 0, 5)
        gen = a.service.generations[("s-cut", mid)]
        assert wait_until(lambda: answer_events_stored(a, "s-cut", mid) >= 4, 10)
        assert not gen.finished()
        n_before = answer_events_stored(a, "s-cut", mid)
        with c.stream("GET", f"{b.url}/sessions/continue-stream/s-cut", params={"message_id": mid}) as r:
            assert r.status_code == 200 and r.headers["x-accel-buffering"] == "no"
            frames = parse_frames(r.iter_lines())
    assert wait_until(gen.finished, 5) and gen.run is not None  # `complete` comes just before the end
    log = stored(a, "s-cut", mid)
    assert frames[0].type == "agent_query" and frames[-1].type == "complete"
    assert frame_units([f.data for f in frames]) == log_units(log)  # nothing lost, nothing reordered
    assert answer_text(frames) == answer_text(log) == gen.run.answer
    assert sum(1 for f in frames if f.type == "answer") < sum(1 for e in log if e.type == "answer")  # coalesced
    assert (
        n_before >= 4
        and frame_units([f.data for f in seen]) == log_units(log)[: len(frame_units([f.data for f in seen]))]
    )


def test_continue_stream_of_a_finished_answer_is_one_coalesced_replay(serve):
    srv = serve()
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{srv.url}/knowledge-chat/s-done", json={"query": Q}, headers={"X-Request-ID": "r-1"})
        mid = r.headers["x-message-id"]
        with c.stream("GET", f"{srv.url}/sessions/continue-stream/s-done", params={"message_id": mid}) as r:
            frames = parse_frames(r.iter_lines())
    log = stored(srv, "s-done", mid)
    assert [f.type for f in frames] == [
        "agent_query",
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "references",
        "answer",
        "answer",
        "complete",
    ]
    assert {f.data["id"] for f in frames} == {"r-1"}  # the message's stored request id
    merged, done = frames[6].data, frames[7].data
    assert merged["content"] == "".join(e.content for e in log if e.type == "answer" and not e.done)
    assert merged["done"] is False and done["done"] is True and done["content"] == ""


@pytest.fixture(scope="module")
def quiet_server(stream_lab):
    """One server for the tests that never start a generation (bad requests)."""
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.server import create_app
    from tests.stream.conftest import ServerThread

    with ServerThread(create_app(stream_lab, manager=MemoryStreamManager())) as srv:
        yield srv


# -- ownership and bad input ---------------------------------------------------------------------


def test_only_the_owner_can_resume_stop_or_ask_and_strangers_learn_nothing(serve):
    keys = {
        "alice-key-0000000000000a": {"user": "alice", "tenant": 1},
        "bob-key-00000000000000b": {"user": "bob", "tenant": 1},
    }
    alice, bob = ({"Authorization": f"Bearer {k}"} for k in keys)
    srv = serve(server={"api_keys": keys, "auto_create_sessions": True})
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        r = c.post("/knowledge-chat/s-own", json={"query": Q}, headers=alice)
        mid = r.headers["x-message-id"]
        unknown = c.get("/sessions/continue-stream/s-nobody", params={"message_id": mid}, headers=bob)
        assert unknown.status_code == 404
        assert unknown.json() == {"success": False, "error": "Session not found", "field": "session_id"}
        for user in (bob, {"X-User-ID": "alice", **bob}):  # another user, even naming the owner
            r = c.get("/sessions/continue-stream/s-own", params={"message_id": mid}, headers=user)
            assert (r.status_code, r.json()) == (404, unknown.json())
            r = c.post("/sessions/s-own/stop", json={"message_id": mid}, headers=user)
            assert (r.status_code, r.json()) == (404, unknown.json())
            r = c.post("/knowledge-chat/s-own", json={"query": Q}, headers=user)
            assert (r.status_code, r.json()) == (404, unknown.json())
        r = c.get("/sessions/continue-stream/s-own", params={"message_id": mid}, headers={"X-User-ID": "alice"})
        assert r.status_code == 401  # anonymous
        r = c.get("/sessions/continue-stream/s-own", params={"message_id": "no-such-message"}, headers=alice)
        assert (r.status_code, r.json()["error"]) == (404, "No stream events found")
        r = c.post("/sessions/s-own/stop", json={"message_id": "no-such-message"}, headers=alice)
        assert (r.status_code, r.json()["error"]) == (404, "Message not found")
        r = c.post("/sessions/s-own/stop", json={"message_id": mid}, headers=alice)
        assert (r.status_code, r.json()) == (200, {"success": True, "message": "Message already completed"})
        r = c.get("/sessions/continue-stream/s-own", params={"message_id": mid}, headers=alice)
        assert r.status_code == 200 and parse_frames(iter(r.text.split("\n")))[-1].type == "complete"


@pytest.mark.parametrize(
    "method, path, kwargs, status, field, fragment",
    [
        ("POST", "/knowledge-chat/s1", {"content": b"{not json"}, 400, "body", "request body is not valid JSON"),
        ("POST", "/knowledge-chat/s1", {"content": b""}, 400, "body", "request body is empty"),
        ("POST", "/knowledge-chat/s1", {"json": ["q"]}, 400, "body", "must be a JSON object"),
        ("POST", "/knowledge-chat/s1", {"json": {}}, 400, "query", "query: required"),
        ("POST", "/knowledge-chat/s1", {"json": {"query": "   "}}, 400, "query", "query: must not be empty"),
        ("POST", "/knowledge-chat/s1", {"json": {"query": 7}}, 400, "query", "query: expected a string, got int"),
        (
            "POST",
            "/knowledge-chat/s1",
            {"json": {"query": "q", "knowledge_base_ids": "demo, x"}},
            400,
            "knowledge_base_ids",
            "'demo, x'",
        ),
        (
            "POST",
            "/knowledge-chat/s1",
            {"json": {"query": "q", "knowledge_base_ids": "demo"}},
            400,
            "knowledge_base_ids",
            "knowledge_base_ids: expected a list of strings, got the string 'demo'",
        ),
        (
            "POST",
            "/knowledge-chat/s1",
            {"json": {"query": "q", "knowledge_base_ids": [3]}},
            400,
            "knowledge_base_ids",
            "expected a list of non-empty strings",
        ),
        ("POST", "/knowledge-chat/s1", {"json": {"query": "q", "kb": ["nope"]}}, 400, "knowledge_base_ids", "'nope'"),
        ("POST", "/knowledge-chat/bad:id", {"json": {"query": "q"}}, 400, "session_id", "session_id: expected"),
        ("GET", "/sessions/continue-stream/s1", {}, 400, "message_id", "message_id: required query parameter"),
        ("GET", "/sessions/continue-stream/s1", {"params": {"message_id": "a b"}}, 400, "message_id", "'a b'"),
        (
            "POST",
            "/knowledge-chat/s1?resource_urls=public",
            {"json": {"query": "q"}},
            400,
            "resource_urls",
            "'public' is not supported",
        ),
        (
            "GET",
            "/sessions/continue-stream/s1",
            {"params": {"message_id": "m", "resource_urls": "x"}},
            400,
            "resource_urls",
            "expected 'handle' or 'public', got 'x'",
        ),
        ("POST", "/sessions/s1/stop", {"content": b""}, 400, "body", "request body is empty"),
        ("POST", "/sessions/s1/stop", {"json": {"message": "x"}}, 400, "message_id", "message_id: required string"),
    ],
)
def test_malformed_requests_get_a_4xx_naming_the_field(quiet_server, method, path, kwargs, status, field, fragment):
    srv = quiet_server
    with httpx.Client(timeout=10, base_url=srv.url) as c:
        r = c.request(method, path, **kwargs)
    assert r.status_code == status
    body = r.json()
    assert body["success"] is False and body["field"] == field and fragment in body["error"]
    assert not srv.service.generations  # nothing was started


def test_unknown_kb_message_names_only_what_was_asked(quiet_server, stream_lab):
    srv = quiet_server
    with httpx.Client(timeout=10, base_url=srv.url) as c:
        r = c.post("/knowledge-chat/s1", json={"query": "q", "knowledge_base_ids": ["demo", "nope"]})
    assert r.status_code == 400 and r.json()["error"] == "knowledge_base_ids: unknown knowledge base 'nope'"
    assert str(stream_lab.workspace.root) not in r.text  # neither the workspace nor the other KBs


# -- stop ----------------------------------------------------------------------------------------


@BACKENDS
def test_stop_mid_stream_ends_the_sse_and_keeps_the_partial_answer(serve, paced, stream_lab, backend):
    srv = serve(backend())
    full = stream_lab.ask(Q, kb="demo", snapshots=False).answer  # the uncut answer, for comparison
    paced.delay_s = 0.05
    live = LiveRead(srv.url, "s-stop")
    live.start()
    assert wait_until(lambda: live.message_id != "", 5)
    mid = live.message_id
    assert wait_until(lambda: answer_events_stored(srv, "s-stop", mid) >= 3, 10)
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        r = c.post("/sessions/s-stop/stop", json={"message_id": mid}, headers={"X-User-ID": "alice"})
        assert (r.status_code, r.json()) == (200, {"success": True, "message": "Generation stopped"})
        live.join(10)
        assert not live.is_alive()
        assert live.frames[-1].data == {
            "id": live.frames[0].data["id"],
            "response_type": "stop",
            "content": "Generation stopped by user",
            "done": True,
            "finish_reason": "",
        }
        log = stored(srv, "s-stop", mid)
        assert log[-1].type == "stop" and log[-1].data == {
            "session_id": "s-stop",
            "message_id": mid,
            "reason": "user_requested",
        }
        assert "complete" not in {e.type for e in log}
        partial = answer_text(log)
        assert partial and len(partial) < len(full) and full.startswith(partial)
        assert answer_text(live.frames) == partial  # the live client saw all of it before the stop
        # the partial answer is the assistant message of that turn
        saved = [m for m in stream_lab.services.messages.get_recent_messages("s-stop", 10) if m.role == "assistant"]
        assert [m.content for m in saved if m.request_id == mid] == [partial]
        r = c.post("/sessions/s-stop/stop", json={"message_id": mid}, headers={"X-User-ID": "alice"})
        assert r.json() == {"success": True, "message": "Generation already stopped"}
        with c.stream(
            "GET", "/sessions/continue-stream/s-stop", params={"message_id": mid}, headers={"X-User-ID": "alice"}
        ) as r:
            replay = parse_frames(r.iter_lines())
        assert replay[-1].type == "stop" and answer_text(replay) == partial


@pytest.mark.redis
def test_a_stop_sent_to_another_replica_reaches_the_generation(serve, paced, stream_lab, redis_url):
    a = serve(RedisStreamManager(url=redis_url))
    b = serve(RedisStreamManager(url=redis_url), stop_watch_interval_s=0.3)
    stream_lab.stream_manager = a.service.manager
    paced.delay_s = 0.05
    live = LiveRead(a.url, "s-remote")
    live.start()
    assert wait_until(lambda: live.message_id != "", 5)
    mid = live.message_id
    assert wait_until(lambda: answer_events_stored(a, "s-remote", mid) >= 2, 10)
    with httpx.Client(timeout=30) as c:
        r = c.post(f"{b.url}/sessions/s-remote/stop", json={"message_id": mid}, headers={"X-User-ID": "alice"})
    assert (r.status_code, r.json()) == (200, {"success": True, "message": "Generation stopped"})
    live.join(10)
    assert live.frames[-1].type == "stop"
    gen = a.service.generations[("s-remote", mid)]
    assert wait_until(gen.finished, 5) and gen.cancel_event.is_set()
    assert "complete" not in {e.type for e in stored(a, "s-remote", mid)}
    assert gen.run is not None and gen.run.answer and "night." not in gen.run.answer  # cut before the end


# -- errors --------------------------------------------------------------------------------------


@contextlib.contextmanager
def without_chat_model(lab):
    """A generation that fails with an error and no answer (the chat model cannot be found; a
    model that fails while answering gets the fallback answer and completes instead)."""
    from rag_lab.lab.lab import CHAT_MODEL_ID

    model = lab.services.chat_models.pop(CHAT_MODEL_ID)
    try:
        yield
    finally:
        lab.services.chat_models[CHAT_MODEL_ID] = model


def test_an_error_without_complete_ends_the_stream_when_generation_is_over(serve, stream_lab):
    srv = serve()
    with without_chat_model(stream_lab), httpx.Client(timeout=30, base_url=srv.url) as c:
        with c.stream("POST", "/knowledge-chat/s-err", json={"query": Q}) as r:
            mid = r.headers["x-message-id"]
            frames = parse_frames(r.iter_lines())
        types = [f.type for f in frames]
        assert "complete" not in types and "error" in types
        err = frames[types.index("error")].data
        assert "chat model" in err["content"] and err["done"] is True
        assert err["data"]["stage"] == "knowledge_qa_execution"
        assert frame_units([f.data for f in frames]) == log_units(stored(srv, "s-err", mid))
        with c.stream("GET", "/sessions/continue-stream/s-err", params={"message_id": mid}) as r:
            again = parse_frames(r.iter_lines())
        assert [f.type for f in again][-1] == types[-1]


@pytest.mark.redis
def test_a_follower_on_another_replica_gives_up_after_the_error_grace(serve, stream_lab, redis_url):
    a = serve(RedisStreamManager(url=redis_url))
    b = serve(RedisStreamManager(url=redis_url), error_grace_s=0.4)
    with without_chat_model(stream_lab), httpx.Client(timeout=30) as c:
        r = c.post(f"{a.url}/knowledge-chat/s-err2", json={"query": Q})
        mid = r.headers["x-message-id"]
        t0 = time.monotonic()
        with c.stream("GET", f"{b.url}/sessions/continue-stream/s-err2", params={"message_id": mid}) as r:
            frames = parse_frames(r.iter_lines())
        waited = time.monotonic() - t0
    assert frames[-1].type in ("error", "answer") and "error" in [f.type for f in frames]
    assert waited >= 0.4  # gave up only after the grace (a lower bound: a busy machine only adds)


# -- reliability ---------------------------------------------------------------------------------


@pytest.mark.slow
@BACKENDS
def test_50_concurrent_streams_with_random_disconnects_and_resumes_lose_nothing(serve, paced, stream_lab, backend):
    a = serve(backend())
    replicas = [a.url]
    if isinstance(a.service.manager, RedisStreamManager):
        replicas.append(serve(backend()).url)
        stream_lab.stream_manager = a.service.manager
    paced.delay_s = 0.01
    questions = [
        Q,
        "How does sourdough bread rise?",
        "When did Mount Ember last erupt?",
        "How does the Sicilian Defence answer 1.e4?",
    ]
    report = asyncio.run(
        run_reliability(
            replicas,
            lambda s, m: a.service.manager.get_events(s, m, 0)[0],
            questions,
            "demo",
            n_streams=50,
            max_cycles=3,
            seed=7,
            backend="test",
        )
    )
    assert report.errors == []
    assert report.streams == 50 and report.resumes >= 50 and report.disconnects >= 25
    assert (report.events_lost, report.order_violations, report.incomplete) == (0, 0, 0)
    assert report.events_stored > 50 * 10


@pytest.mark.redis
def test_a_redis_restart_mid_stream_loses_only_what_was_stored_before(serve, paced, stream_lab, volatile_redis):
    """--save '': the restart empties Redis (events and session owners). The generation goes on,
    the live reader (past the end of the new, shorter list) picks the new events up from 0 and
    ends with `complete`; the replica running the generation still knows the session's owner."""
    srv = serve(RedisStreamManager(url=volatile_redis.url))
    paced.delay_s = 0.05
    live = LiveRead(srv.url, "s-restart")
    live.start()
    assert wait_until(lambda: live.message_id != "", 5)
    mid = live.message_id
    assert wait_until(lambda: answer_events_stored(srv, "s-restart", mid) >= 3, 10)
    volatile_redis.restart()
    live.join(20)
    assert not live.is_alive() and live.frames[-1].type == "complete"
    gen = srv.service.generations[("s-restart", mid)]
    assert wait_until(gen.finished, 5) and not gen.error
    log = stored(srv, "s-restart", mid)
    assert log and log[0].type != "agent_query" and log[-1].type == "complete"  # the head was lost
    got, kept = frame_units([f.data for f in live.frames]), log_units(log)
    assert got[-len(kept) :] == kept  # everything stored after the restart reached the live reader
    # before it, the reader got a prefix of the answer; what was stored between its last read and
    # the restart is gone. The generation itself lost nothing: its answer is whole.
    full = stream_lab.ask(Q, kb="demo", snapshots=False).answer
    live_text, new_text = answer_text(live.frames), answer_text(log)
    head = live_text[: len(live_text) - len(new_text)]
    assert gen.run.answer == full and full.startswith(head) and full.endswith(new_text)
    assert len(head) + len(new_text) <= len(full)
    with httpx.Client(timeout=30) as c:
        with c.stream(
            "GET",
            f"{srv.url}/sessions/continue-stream/s-restart",
            params={"message_id": mid},
            headers={"X-User-ID": "alice"},
        ) as r:
            assert r.status_code == 200
            replay = parse_frames(r.iter_lines())
    assert frame_units([f.data for f in replay]) == kept


# -- the serve command ---------------------------------------------------------------------------


def test_serve_command_options_and_a_bad_backend_fail_before_loading_anything(tmp_path, capsys):
    import argparse

    from rag_lab.stream.serve_cli import cmd_serve, main

    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=None)
    ap.add_argument("--workspace", default=None)
    cmd_serve.add_to(ap.add_subparsers(dest="command"))
    args = ap.parse_args(["--workspace", "top", "serve", "--port", "9001", "--stream-manager", "redis://h:1/2"])
    assert (args.host, args.port, args.workspace, args.config, args.stream_manager) == (
        "127.0.0.1",
        9001,
        "top",
        None,
        "redis://h:1/2",
    )
    args = ap.parse_args(["serve", "--workspace", "inner", "--config", "c.yaml"])
    assert (args.workspace, args.config, args.stream_manager) == ("inner", "c.yaml", None)
    assert main(["--workspace", str(tmp_path / "ws"), "serve", "--stream-manager", "kafka"]) == 2
    assert "unknown stream manager 'kafka'" in capsys.readouterr().err
    assert not (tmp_path / "ws").exists()


@pytest.mark.slow
def test_serve_command_serves_a_live_answer(tmp_path, docs_dir):
    from rag_lab.lab import Lab

    ws = tmp_path / "ws"
    Lab.from_config(workspace=ws).ingest(docs_dir, kb="demo", progress=False)
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rag_lab.stream.serve_cli",
            "--workspace",
            str(ws),
            "serve",
            "--port",
            str(port),
            "--stream-manager",
            "memory",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:

        def up() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_until(up, 30), proc.stderr.read1().decode() if proc.poll() is not None else "not up"
        with httpx.Client(timeout=30) as c:
            r = c.post(f"http://127.0.0.1:{port}/knowledge-chat/cli", json={"query": Q})
        frames = parse_frames(iter(r.text.split("\n")))
        assert frames[0].type == "agent_query" and frames[-1].type == "complete"
        assert "1874" in answer_text(frames)
    finally:
        proc.terminate()
        proc.wait(10)
    banner = proc.stderr.read().decode()
    assert f"rag-lab serve: http://127.0.0.1:{port}" in banner and "knowledge bases: demo" in banner


# -- frames and settings (pure) ------------------------------------------------------------------


def test_stream_response_from_stored_events():
    from rag_lab.stream.server import build_stream_response, sse_frame
    from rag_lab.types.stream import StreamEvent

    q = build_stream_response(
        StreamEvent("query-1", "agent_query", "", True, 1.0, {"session_id": "s", "assistant_message_id": "m"}), "req"
    )
    assert (q.id, q.session_id, q.assistant_message_id, q.done) == ("req", "s", "m", True)
    refs = [{"id": "c1", "content": "x"}]
    r = build_stream_response(StreamEvent("e", "references", "", False, 1.0, {"references": refs}), "req")
    assert r.knowledge_references == refs and r.data == {"references": refs}
    stop = build_stream_response(StreamEvent("stop-1", "stop", "", True, 1.0, {"reason": "user_requested"}), "req")
    assert stop.to_dict() == {
        "id": "req",
        "response_type": "stop",
        "content": "Generation stopped by user",
        "done": True,
        "finish_reason": "",
    }
    a = build_stream_response(
        StreamEvent("x-answer", "answer", "a < b & c > d", False, 1.0, {"event_id": "x-answer"}), "req"
    )
    assert sse_frame(a) == (
        b'event:message\ndata:{"id":"req","response_type":"answer","content":'
        b'"a \\u003c b \\u0026 c \\u003e d","done":false,"data":{"event_id":"x-answer"},'
        b'"finish_reason":""}\n\n'
    )


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=20), st.integers(), st.booleans()), max_size=5))
def test_encode_json_round_trips_and_escapes_like_go(obj):
    from rag_lab.stream.server import encode_json

    text = encode_json(obj)
    assert json.loads(text) == obj
    assert not any(ch in text for ch in "<>&\u2028\u2029\n")


def test_settings_take_the_spec_timings_from_params_when_present():
    from types import SimpleNamespace

    from rag_lab.stream.server import StreamServerSettings
    from rag_lab.types.params import PipelineParams

    d = StreamServerSettings.from_params(PipelineParams())
    assert (d.poll_interval_s, d.stop_watch_interval_s, d.stop_watch_max_s) == (0.1, 0.3, 7200.0)
    p = SimpleNamespace(sse_poll_interval_ms=50, stop_watch_interval_ms=1000, stop_watch_max_s=60)
    s = StreamServerSettings.from_params(p)
    assert (s.poll_interval_s, s.stop_watch_interval_s, s.stop_watch_max_s) == (0.05, 1.0, 60.0)


def test_the_reliability_check_detects_loss_reordering_and_incomplete_streams():
    """The harness behind the reliability figures must be able to fail."""
    from benchmarks.stream_reliability import Report, StreamOutcome, check
    from rag_lab.stream.server import build_stream_response
    from rag_lab.types.stream import StreamEvent

    log = [
        StreamEvent("q", "agent_query", "", True, 1.0, {"session_id": "s"}),
        StreamEvent("r", "references", "", False, 2.0, {"references": []}),
        StreamEvent("a", "answer", "Hello ", False, 3.0, {"event_id": "a"}),
        StreamEvent("a", "answer", "world", False, 4.0, {"event_id": "a"}),
        StreamEvent("a", "answer", "", True, 5.0, {"event_id": "a"}),
        StreamEvent("c", "complete", "", True, 6.0, {"total_steps": 3}),
    ]

    def frames(events):
        return [Frame("message", json.loads(json.dumps(build_stream_response(e, "").to_dict()))) for e in events]

    merged = StreamEvent("a", "answer", "Hello world", False, 4.0, {"event_id": "a"})
    ok = Report("t")
    check(ok, StreamOutcome("s", "m", [frames(log[:3])], frames(log[:2] + [merged] + log[4:])), log)
    assert (ok.events_lost, ok.order_violations, ok.incomplete) == (0, 0, 0)

    lost = Report("t")
    check(lost, StreamOutcome("s", "m", [], frames(log[:3] + log[4:])), log)  # "world" never arrives
    assert lost.events_lost == 3 and lost.order_violations == 1 and lost.incomplete == 0

    swapped = Report("t")
    check(swapped, StreamOutcome("s", "m", [frames([log[0], log[2], log[1]])], frames(log)), log)
    assert (swapped.order_violations, swapped.events_lost) == (1, 0)

    cut = Report("t")
    check(cut, StreamOutcome("s", "m", [], frames(log[:5])), log)
    assert (cut.incomplete, cut.events_lost) == (1, 1)


def test_finished_generations_are_forgotten_and_their_streams_still_resume(serve):
    srv = serve(keep_finished_s=0.0)
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        first = c.post("/knowledge-chat/s-gc", json={"query": Q}).headers["x-message-id"]
        assert wait_until(lambda: srv.service.generations[("s-gc", first)].finished(), 5)
        second = c.post("/knowledge-chat/s-gc", json={"query": "What is sourdough?"}).headers["x-message-id"]
        assert ("s-gc", first) not in srv.service.generations and ("s-gc", second) in srv.service.generations
        r = c.get("/sessions/continue-stream/s-gc", params={"message_id": first})
        frames = parse_frames(iter(r.text.split("\n")))
        assert frames[0].type == "agent_query" and frames[-1].type == "complete" and "1874" in answer_text(frames)


def test_an_idle_server_lets_finished_streams_go_once_their_ttl_passes(serve):
    """Memory stays bounded while idle: the maintenance loop forgets finished generations after
    ``keep_finished_s`` and drops in-process logs past their TTL, with no new ask to trigger it
    (``benchmarks/stream_reliability.py --soak`` measures the RSS of a bigger soak)."""
    from rag_lab.stream.manager import MemoryStreamManager

    manager = MemoryStreamManager(ttl_s=1.0)
    srv = serve(manager=manager, keep_finished_s=0.2, heartbeat_s=0.05)
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        for i in range(12):
            r = c.post(f"/knowledge-chat/s-soak{i}", json={"query": Q})
            assert parse_frames(iter(r.text.split("\n")))[-1].type == "complete"
    # nothing is asked from here on: only the maintenance loop can let them go
    assert wait_until(lambda: len(manager) == 0 and not srv.service.generations, timeout=30)
    assert manager.expire() == 0
