"""Two ``rag-lab serve`` replicas under faults: a PostgreSQL restart while asks are in retrieval
and in generation, and a stop sent to the replica that is not generating. Shared by
``benchmarks/stream_reliability.py`` (its ``--team`` rounds) and the tests
(``tests/stream/test_stream_pg_restart.py``, ``tests/stream/test_stream_two_replicas.py``).

The chat model is the loopback fake OpenAI server (:class:`GatedModel`), which can hold a
request until the test lets it go: the query-understanding call of an ask (the last step before
retrieval reads the store) or the answer stream of an ask. That is how an ask is put *in
retrieval* or *in generation* when PostgreSQL goes down, without relying on timing: the store is
stopped while the requests are held, then they are let go.

What each round reports is what a client sees (:class:`AskResult`: the frames, the session read
right after the stream ended) and what the shared state holds afterwards (in-flight records,
the Redis log).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.stream_reliability import Frame, iter_frames
from rag_lab.stream.manager import answer_text
from tests.models.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

__all__ = [
    "AskResult",
    "GatedModel",
    "StopResult",
    "cross_replica_stop_round",
    "in_flight_rows",
    "pg_restart_round",
]

#: the system prompt's start of the query-understanding call (the step before retrieval)
_UNDERSTAND = "You prepare a user's question for a document search"


class GatedModel:
    """The fake OpenAI server's chat replies: a paced answer of ``words`` words, and two gates.

    An ask whose question holds ``[hold-retrieval]`` has its query-understanding request held
    until :attr:`retrieval` is set; one holding ``[hold-generation]`` has its answer stream held
    until :attr:`generation` is set. :meth:`wait_held` waits until that many requests are held."""

    def __init__(self, server: FakeOpenAIServer, words: Sequence[str], piece_delay: float = 0.02) -> None:
        self.server = server
        self.words = list(words)
        server.piece_delay = piece_delay
        self.retrieval = threading.Event()
        self.generation = threading.Event()
        self._held = {"retrieval": 0, "generation": 0}
        self._cond = threading.Condition()
        server.stream_reply = self._reply
        self._script()

    def _script(self) -> None:
        # every non-streamed chat request goes through _reply too (a callable scripted reply)
        self.server.script("/v1/chat/completions", *([self._reply] * 10_000))

    def _hold(self, phase: str, gate: threading.Event) -> None:
        with self._cond:
            self._held[phase] += 1
            self._cond.notify_all()
        gate.wait(120)

    def held(self, phase: str) -> int:
        with self._cond:
            return self._held[phase]

    def wait_held(self, phase: str, n: int, asks: Sequence[AskResult] = (), timeout_s: float = 60.0) -> None:
        """Wait until ``n`` requests of ``phase`` are held; raises when one of ``asks`` failed first."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._held[phase] < n:
                failed = [a.error for a in asks if a.error]
                if failed or time.monotonic() > deadline:
                    raise RuntimeError(f"{self._held[phase]} of {n} {phase} requests reached the model; {failed}")
                self._cond.wait(0.2)

    def _reply(self, req: RecordedRequest) -> Reply:
        body = req.json if isinstance(req.json, dict) else {}
        text = json.dumps(body, ensure_ascii=False)
        system = str((body.get("messages") or [{}])[0].get("content", ""))
        if req.stream:
            if "[hold-generation]" in text:
                self._hold("generation", self.generation)
            return Reply.chat(self.words)
        if system.startswith(_UNDERSTAND) and "[hold-retrieval]" in text:
            self._hold("retrieval", self.retrieval)
        return self.server._default_reply(req)


@dataclass
class AskResult:
    """One ask as its client saw it."""

    replica: str
    session_id: str
    message_id: str = ""
    frames: list[Frame] = field(default_factory=list)
    #: the session's messages read (on the other replica) right after the stream's last frame
    messages_after: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""

    @property
    def last(self) -> str:
        return self.frames[-1].type if self.frames else ""

    @property
    def answer(self) -> str:
        return "".join(str(f.data.get("content", "")) for f in self.frames if f.type == "answer")


def _ask(client: Any, url: str, other: str, question: str, kb: str, out: AskResult) -> None:
    """Ask on ``url`` in a new session; read the stream to its end, then the session on ``other``."""
    try:
        created = client.post(f"{url}/sessions", json={"title": question[:40]})
        created.raise_for_status()
        out.session_id = created.json()["data"]["id"]
        with client.stream("POST", f"{url}/knowledge-chat/{out.session_id}", json={"query": question, "kb": kb}) as r:
            if r.status_code != 200:
                out.error = f"ask answered {r.status_code}: {r.read()[:300]!r}"
                return
            out.message_id = r.headers["x-message-id"]
            for frame in iter_frames(r.iter_lines()):
                out.frames.append(frame)
                if frame.type in ("complete", "stop"):
                    break
        got = client.get(f"{other}/sessions/{out.session_id}")
        got.raise_for_status()
        out.messages_after = got.json()["data"]["messages"]
    except Exception as exc:  # reported, not raised: the round goes on with the other asks
        out.error = f"{type(exc).__name__}: {exc}"


def _start(client: Any, urls: Sequence[str], question: str, kb: str, i: int) -> tuple[AskResult, threading.Thread]:
    url, other = urls[i % len(urls)], urls[(i + 1) % len(urls)]
    out = AskResult(replica=url, session_id="")
    t = threading.Thread(target=_ask, args=(client, url, other, question, kb, out), daemon=True)
    t.start()
    return out, t


def start_team(
    folder: Any, dsn: str, redis_url: str, docs: Any, chat: dict[str, Any], keys: dict[str, Any]
) -> list[Any]:
    """Ingest ``docs`` into the shared store at ``dsn`` (KB ``demo``, tenant 1), then start two
    ``rag-lab serve`` replicas A and B over it and Redis, each with its own folder under
    ``folder``; returns them running (stop each with ``.stop()``)."""
    from benchmarks.replicas import ServeReplica, start_all, write_config
    from benchmarks.stream_reliability import free_port
    from rag_lab.lab import Lab

    lab = Lab.from_config({"store": {"type": "postgres", "dsn": dsn}}, workspace=folder / "ingest")
    lab.ingest(docs, kb="demo", progress=False)
    lab.workspace.close()
    lab.sessions.close()
    replicas = [
        ServeReplica(
            write_config(folder / f"{n}.yaml", folder / n, dsn, api_keys=keys, chat=chat), free_port(), redis_url
        )
        for n in ("a", "b")
    ]
    start_all(replicas)
    return replicas


def pg_restart_round(
    urls: Sequence[str],
    headers: dict[str, str],
    model: GatedModel,
    pg: Any,
    *,
    kb: str,
    question: str,
    per_phase: int = 3,
    down_s: float = 1.0,
) -> tuple[list[AskResult], list[AskResult], float]:
    """``per_phase`` asks held in generation and ``per_phase`` held before retrieval, spread over
    the replicas; PostgreSQL (``pg``: :class:`tests.pg_server.PostgresServer`) is stopped, both
    gates are let go, and it is started again ``down_s`` seconds later. Returns the asks held in
    retrieval, those held in generation (each read to its end) and the seconds the store was down."""
    import httpx

    model.retrieval.clear()
    model.generation.clear()
    base = {p: model.held(p) for p in ("retrieval", "generation")}
    with httpx.Client(timeout=httpx.Timeout(120, connect=10), headers=headers) as client:
        generating = [_start(client, urls, f"{question} [hold-generation] {i}", kb, i) for i in range(per_phase)]
        model.wait_held("generation", base["generation"] + per_phase, [a for a, _ in generating])
        retrieving = [_start(client, urls, f"{question} [hold-retrieval] {i}", kb, i) for i in range(per_phase)]
        model.wait_held("retrieval", base["retrieval"] + per_phase, [a for a, _ in retrieving])
        t0 = time.monotonic()
        pg.pause()  # both groups are held at the model: the store goes down under them
        model.retrieval.set()  # the asks go on into retrieval, which reads the store
        model.generation.set()  # the answers stream, then the turns are saved to the store
        time.sleep(down_s)
        pg.resume()
        down = time.monotonic() - t0
        for _, t in retrieving + generating:
            t.join(180)
    return [a for a, _ in retrieving], [a for a, _ in generating], down


def in_flight_rows(dsn: str) -> list[tuple[str, str]]:
    """The (session, message) of every in-flight record in the shared store."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT session_id, message_id FROM in_flight").fetchall()]


@dataclass
class StopResult:
    """A stop sent to replica B while replica A generates."""

    stop_reply: dict[str, Any]
    #: what B's reader saw, to its ``stop``
    read_on_b: AskResult
    #: the Redis log after the generation ended
    log_types: list[str]
    #: answer deltas the log holds after its ``stop``
    deltas_after_stop: int
    #: the answer in the log up to its ``stop``
    log_answer: str
    #: the assistant message as saved, read on A and on B
    saved_on_a: str
    saved_on_b: str


def cross_replica_stop_round(
    a: str,
    b: str,
    headers: dict[str, str],
    redis_url: str,
    *,
    kb: str,
    question: str,
    stop_after: int = 8,
    settle_s: float = 20.0,
) -> StopResult:
    """Ask on A, follow the stream on B, stop it on B after ``stop_after`` answer frames; then read
    the Redis log (once A's generation has ended) and the saved answer on both replicas."""
    import httpx

    from rag_lab.stream.redis_manager import RedisStreamManager

    with httpx.Client(timeout=60, headers=headers) as c:
        sid = c.post(f"{a}/sessions", json={"title": "stop"}).json()["data"]["id"]
        read = AskResult(replica=b, session_id=sid)
        with c.stream("POST", f"{a}/knowledge-chat/{sid}", json={"query": question, "kb": kb}) as r:
            read.message_id = r.headers["x-message-id"]
            for f in iter_frames(r.iter_lines()):
                if f.type == "answer":
                    break  # A is generating; its reader leaves
        stop_reply: dict[str, Any] = {}
        with c.stream("GET", f"{b}/sessions/continue-stream/{sid}", params={"message_id": read.message_id}) as r:
            for f in iter_frames(r.iter_lines()):
                read.frames.append(f)
                if not stop_reply and sum(x.type == "answer" for x in read.frames) >= stop_after:
                    stop_reply = c.post(f"{b}/sessions/{sid}/stop", json={"message_id": read.message_id}).json()
                if f.type in ("stop", "complete"):
                    break
        saved: dict[str, str] = {}
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:  # A saves the partial once its generation has ended
            msgs = c.get(f"{a}/sessions/{sid}").json()["data"]["messages"]
            if len(msgs) == 2 and msgs[1]["is_completed"]:
                break
            time.sleep(0.1)
        for name, url in (("a", a), ("b", b)):
            msgs = c.get(f"{url}/sessions/{sid}").json()["data"]["messages"]
            saved[name] = msgs[1]["content"] if len(msgs) == 2 else ""
    manager = RedisStreamManager(url=redis_url)
    try:
        log, _ = manager.get_events(sid, read.message_id, 0)
    finally:
        manager.close()
    types = [e.type for e in log]
    stop_at = types.index("stop") if "stop" in types else len(types)
    return StopResult(
        stop_reply=stop_reply,
        read_on_b=read,
        log_types=types,
        deltas_after_stop=sum(t == "answer" for t in types[stop_at + 1 :]),
        log_answer=answer_text(log[:stop_at]),
        saved_on_a=saved["a"],
        saved_on_b=saved["b"],
    )


# -- the benchmark's rounds (benchmarks/stream_reliability.py --team) ----------------------------------


def team_rounds(rounds: int = 3, per_phase: int = 4, down_s: float = 1.0) -> None:
    """Print the PostgreSQL-restart and cross-replica-stop rounds over two real replicas: one
    PostgreSQL, one Redis (AOF), the gated fake model; ``rounds`` of each."""
    import shutil
    import tempfile
    from pathlib import Path

    from benchmarks.stream_reliability import RedisServer
    from tests.conftest import DOCS
    from tests.pg_server import PostgresServer

    key = "bench-team-key-0123456789abcdef"
    headers = {"Authorization": f"Bearer {key}"}
    question = "When was the Brightwater lighthouse built?"
    tmp = Path(tempfile.mkdtemp(prefix="rag_lab_bench_faults_"))
    docs = tmp / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    pg = PostgresServer().start()
    redis = RedisServer(tmp / "redis").start()
    replicas: list[Any] = []
    try:
        dsn = pg.new_database("faults")
        with FakeOpenAIServer() as server:
            words = [f"Part{i} " for i in range(40)]
            model = GatedModel(server, words, piece_delay=0.02)
            chat = {"type": "openai", "model": "gated", "base_url": server.base_url, "max_retries": 0, "timeout": 60}
            replicas = start_team(tmp, dsn, redis.url, docs, chat, {key: {"user": "bench", "tenant": 1}})
            urls = [r.url for r in replicas]
            print(
                f"== two replicas, PostgreSQL restarts: {rounds} rounds, {per_phase} asks held before retrieval "
                f"and {per_phase} in generation each, {down_s:.1f} s down"
            )
            totals = {"asks": 0, "complete": 0, "failed": 0, "answer_after_complete": 0, "in_flight_left": 0}
            for i in range(rounds):
                retrieving, generating, down = pg_restart_round(
                    urls, headers, model, pg, kb="demo", question=question, per_phase=per_phase, down_s=down_s
                )
                asks = retrieving + generating
                complete = sum(a.last == "complete" and a.answer == "".join(words) for a in asks)
                with_answer = sum(
                    any(m["role"] == "assistant" and m["content"] == "".join(words) for m in a.messages_after)
                    for a in asks
                )
                left = len(in_flight_rows(dsn))
                failed = [a.error or a.last for a in asks if a.last != "complete"]
                print(
                    f"round {i + 1}: store down {down:.1f} s; {complete}/{len(asks)} asks complete with the whole "
                    f"answer, {with_answer}/{len(asks)} sessions read right after the end hold it, "
                    f"{left} in-flight records left; failures: {failed or 'none'}"
                )
                for k, v in (
                    ("asks", len(asks)),
                    ("complete", complete),
                    ("failed", len(failed)),
                    ("answer_after_complete", with_answer),
                    ("in_flight_left", left),
                ):
                    totals[k] += v
            print(f"total: {totals}")
            print(f"== two replicas, stop sent to B while A generates: {rounds} rounds")
            server.piece_delay = 0.05
            model.words = [f"Word{i} " for i in range(200)]  # long enough to be stopped midway
            after = same = 0
            for i in range(rounds):
                res = cross_replica_stop_round(urls[0], urls[1], headers, redis.url, kb="demo", question=question)
                equal = res.saved_on_a == res.saved_on_b == res.log_answer == res.read_on_b.answer
                after += res.deltas_after_stop
                same += int(equal)
                print(
                    f"round {i + 1}: {res.stop_reply.get('message')!r}; answer deltas after stop in the log: "
                    f"{res.deltas_after_stop}; reader up to stop {len(res.read_on_b.answer)} chars, log "
                    f"{len(res.log_answer)}, saved {len(res.saved_on_a)} (A) / {len(res.saved_on_b)} (B); "
                    f"equal: {equal}"
                )
            print(f"total: {after} answer deltas after stop in {rounds} logs; saved = replayed in {same}/{rounds}")
    finally:
        for r in replicas:
            r.stop()
        redis.stop()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
