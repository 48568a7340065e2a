"""Finding 8: streams after faults. Real redis-server (the shipped AOF config) and real server
processes, killed and restarted by the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from benchmarks.stream_reliability import REDIS_CONF, ServerThread, free_port, iter_frames, parse_frames
from rag_lab.stream.redis_manager import RedisStreamManager
from rag_lab.types.stream import StreamEvent
from tests.models.fake_openai import FakeOpenAIServer, Reply

Q = "When was the lighthouse built?"


def ev(i: int) -> StreamEvent:
    return StreamEvent(f"{i:04d}-answer", "answer", f"piece {i} ", False, data={"i": i})


@pytest.mark.redis
def test_a_retried_append_whose_reply_was_lost_is_stored_once(redis_url):
    """The reply of an applied append is lost (connection cut after Redis ran it): the client
    retries, and the event is stored once, not twice."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    m = RedisStreamManager(url=redis_url, prefix="idem")
    real = m.client.parse_response
    lost: list[str] = []

    def parse_response(conn, command_name, **options):
        reply = real(conn, command_name, **options)  # Redis has applied the command
        if command_name in ("EVALSHA", "EVAL") and not lost:  # the first append's reply only
            lost.append(command_name)
            raise RedisConnectionError("connection reset before the reply was read")
        return reply

    m.client.parse_response = parse_response
    for i in range(5):
        m.append_event("s", "m", ev(i))
    assert lost == ["EVALSHA"]
    events, n = m.get_events("s", "m", 0)
    assert n == 5 and [e.data["i"] for e in events] == [0, 1, 2, 3, 4]
    assert m.client.ttl("idem#ids:s:m") > 3590  # the id set expires with the list


@pytest.mark.redis
def test_an_aof_redis_loses_nothing_on_restart_or_on_a_kill_after_a_second(own_redis):
    assert own_redis.aof and REDIS_CONF.is_file()
    conf = REDIS_CONF.read_text()
    assert "appendonly yes" in conf and "appendfsync everysec" in conf
    m = RedisStreamManager(url=own_redis.url, prefix="aof")
    for i in range(50):
        m.append_event("s", "m", ev(i))
    own_redis.restart()  # SIGTERM: Redis flushes the AOF
    assert [e.data["i"] for e in m.get_events("s", "m", 0)[0]] == list(range(50))
    for i in range(50, 100):
        m.append_event("s", "m", ev(i))
    time.sleep(1.5)  # appendfsync everysec
    own_redis.kill()
    own_redis.start()
    events, n = m.get_events("s", "m", 0)
    assert n == 100 and [e.data["i"] for e in events] == list(range(100))


# -- a server process killed mid-answer ----------------------------------------------------------


@pytest.fixture(scope="module")
def slow_model():
    """An OpenAI-compatible model streaming 60 pieces, 0.1 s apart (a 6 s answer)."""
    with FakeOpenAIServer() as srv:
        srv.piece_delay = 0.1
        srv.stream_reply = Reply.chat([f"Word{i} " for i in range(60)])
        yield srv


class ServeProcess:
    def __init__(self, cfg: Path, port: int, backend: str) -> None:
        self.cmd = [
            sys.executable,
            "-m",
            "rag_lab.cli",
            "--config",
            str(cfg),
            "serve",
            "--port",
            str(port),
            "--stream-manager",
            backend,
            "--log-level",
            "warning",
        ]
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        """Start and wait until it answers; returns the time it was up."""
        env = dict(os.environ, PYTHONPATH=os.getcwd(), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(self.proc.stderr.read().decode()[-3000:])
            try:
                if httpx.get(self.url + "/health", timeout=0.5).status_code == 200:
                    return time.monotonic()
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("rag-lab serve did not come up in 60 s")

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_after_a_kill_9_the_orphaned_message_ends_on_restart_and_its_partial_answer_is_saved(
    tmp_path, docs_dir, slow_model, backend, request
):
    from rag_lab.lab import Lab
    from rag_lab.session.sqlite_store import SQLiteSessionStore

    ws = tmp_path / "ws"
    Lab.from_config(workspace=ws).ingest(docs_dir, kb="demo", progress=False)
    cfg = tmp_path / "lab.yaml"
    model = {"type": "openai", "model": "slow", "base_url": slow_model.base_url, "max_retries": 0, "timeout": 30}
    cfg.write_text(yaml.safe_dump({"workspace": str(ws), "models": {"chat": model}}))
    spec = request.getfixturevalue("own_redis").url if backend == "redis" else "memory"
    server = ServeProcess(cfg, free_port(), spec)
    server.start()
    try:
        seen: list = []
        with httpx.Client(timeout=30) as c:
            with c.stream("POST", f"{server.url}/knowledge-chat/s-crash", json={"query": Q, "kb": "demo"}) as r:
                mid = r.headers["x-message-id"]
                for f in iter_frames(r.iter_lines()):
                    seen.append(f)
                    if sum(1 for x in seen if x.type == "answer") >= 25:  # 2.5 s: heartbeats ran
                        break
                server.kill9()  # mid-answer, with this reader still attached
        partial_seen = "".join(f.data["content"] for f in seen if f.type == "answer")
        assert partial_seen.startswith("Word0 Word1 ") and "Word59" not in partial_seen
        server.start()
        # the restarted server ends the orphan itself: the replay completes (the client's 30 s timeout
        # is a hang guard, not a speed claim: no test asserts elapsed time)
        with httpx.Client(timeout=30) as c:
            r = c.get(f"{server.url}/sessions/continue-stream/s-crash", params={"message_id": mid})
        assert r.status_code == 200, r.text
        frames = parse_frames(iter(r.text.split("\n")))
        assert [f.type for f in frames[-2:]] == ["error", "complete"]
        assert frames[-2].data["data"]["stage"] == "server_restart"
        replayed = "".join(f.data["content"] for f in frames if f.type == "answer")
        assert replayed.startswith("Word0 ") and "Word59" not in replayed
        if backend == "redis":  # the log survived: the replay holds at least what the reader saw
            assert replayed.startswith(partial_seen)
        else:  # the log died with the process: what the last heartbeat (<= 1 s before) saved
            assert partial_seen.startswith(replayed) and len(replayed.split()) >= 10
        with SQLiteSessionStore(ws / "sessions.sqlite") as store:
            saved = store.find_message("s-crash", mid)
            assert saved is not None and saved.extra.get("interrupted") is True
            assert saved.content == replayed and saved.content  # the session store has the same answer
            assert store.list_generations() == []
            assert saved.knowledge_references and saved.knowledge_references[0].knowledge_title
        # a finished answer also replays after a restart (the memory log is gone: from SQLite)
        with httpx.Client(timeout=30) as c:
            r = c.post(f"{server.url}/sessions/s-crash/stop", json={"message_id": mid})
            assert r.json() == {"success": True, "message": "Message already completed"}
    finally:
        server.stop()


def test_a_reader_of_a_stopped_message_ends_without_waiting_for_a_hanging_model(tmp_path, docs_dir):
    from rag_lab.lab import Lab
    from rag_lab.stream.server import create_app

    with FakeOpenAIServer() as fake:
        fake.stream_reply = Reply.chat("too late", delay=6)
        for _ in range(4):  # query understanding and the title hang as well
            fake.script("/v1/chat/completions", Reply.chat("{}", delay=6))
        lab = Lab.from_config(
            {
                "workspace": str(tmp_path / "ws"),
                "models": {"chat": {"type": "openai", "model": "m", "base_url": fake.base_url, "max_retries": 0}},
            }
        )
        lab.ingest(docs_dir, kb="demo", progress=False)
        with ServerThread(create_app(lab, server={})) as srv, httpx.Client(timeout=30, base_url=srv.url) as c:
            frames: list = []
            ended = threading.Event()

            def read() -> None:
                with c.stream("POST", "/knowledge-chat/s-hang", json={"query": Q, "kb": "demo"}) as r:
                    frames.append(r.headers["x-message-id"])
                    for f in iter_frames(r.iter_lines()):
                        frames.append(f)
                ended.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            deadline = time.monotonic() + 60  # a hang guard: the first frame comes at once when idle
            while not frames and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.5)  # the generation is now stuck in a model call
            with httpx.Client(timeout=30, base_url=srv.url) as c2:
                r = c2.post("/sessions/s-hang/stop", json={"message_id": frames[0]})
                assert r.json()["message"] == "Generation stopped"
                assert ended.wait(30), "the reader did not end after the stop"  # a hang guard only
            # the reader ended on the stop, not on the model: its delayed reply never reached the stream
            assert frames[-1].type == "stop"
            assert "too late" not in "".join(f.data.get("content", "") for f in frames[1:] if f.type == "answer")
            for g in srv.service.generations.values():
                g.cancel_event.set()
