"""Stream reliability: concurrent SSE streams with random disconnects and resumes, memory and Redis.

Usage: .venv/bin/python benchmarks/stream_reliability.py [N_STREAMS] [MAX_CYCLES] [SEED]
       .venv/bin/python benchmarks/stream_reliability.py --team [ROUNDS]
       .venv/bin/python benchmarks/stream_reliability.py --soak [N_STREAMS]

For each backend it starts the chat server on loopback (one replica for memory; two replicas
sharing one redis-server for Redis, each resume going to a random replica), then runs N_STREAMS
questions at once. Every stream: ask, read a random number of frames, disconnect; then up to
MAX_CYCLES-1 partial resumes (continue-stream, read a few frames, disconnect); then a final
resume read to the end. Every read is checked against the stored event log:

* order violations: reads whose content is not a prefix of the log (in order, nothing skipped);
* events lost: stored events the final resume did not deliver;
* incomplete: streams whose final read did not end with ``complete``;
* answer mismatches: streams whose answer in the log differs from the assistant message saved in
  the session store (SQLite, an independent copy written by the generation itself);
* duplicated: stored events whose append id occurs more than once in the log.

Reads are compared as units: each character of an answer / thinking / reflection delta, and each
other event whole, so a coalesced replay (Appendix A.2) compares equal to the raw log.

It then restarts Redis while streams are generating, once with the shipped AOF config
(``config/redis-stream.conf``: nothing may be lost or duplicated) and once without persistence
(``--save ''``, for contrast), and prints what survives. The chat model is the offline extractive answerer paced at 20 ms per streamed
chunk, so streams last long enough to be cut. The test suite runs a reduced version
(tests/stream/test_stream_server.py) with the same harness.

``--team [ROUNDS]`` (default 3) runs the team-deployment rounds instead, over two real ``rag-lab
serve`` replicas sharing one PostgreSQL and one Redis (``benchmarks/replica_faults.py``): a
PostgreSQL restart (1 s down) while 4 asks are held before retrieval and 4 in generation (asks
complete, sessions read right after ``complete`` hold the answer, in-flight records left), and a
stop sent to replica B while A generates (answer deltas after ``stop`` in the Redis log; saved
answer = the one a reader up to ``stop`` saw). ``--soak [N_STREAMS]`` (default 2000) measures the
server's RSS after a soak and after an idle period past the stream TTL (``benchmarks/stream_soak.py``).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.stream.coalesce import DELTA_TYPES
from rag_lab.types.stream import StreamEvent

# -- loopback infrastructure (shared with tests/stream) ----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


REDIS_BIN = shutil.which("redis-server")
#: the Redis config rag-lab ships for the stream manager (AOF, fsync every second)
REDIS_CONF = Path(__file__).resolve().parents[1] / "config" / "redis-stream.conf"


#: how long a server (redis-server, uvicorn with the app's lifespan) may take to start: a hang
#: guard, not a speed claim (a busy machine starts them slowly)
START_TIMEOUT_S = 120.0


class RedisServer:
    """A redis-server process we own, restartable on the same port. ``aof=True`` (the default)
    runs the shipped ``config/redis-stream.conf`` (append-only file, ``appendfsync everysec``);
    ``aof=False`` runs without any persistence (``--save '' --appendonly no``), to show what a
    Redis that loses its data does to streams."""

    def __init__(self, workdir: Path, port: int | None = None, aof: bool = True) -> None:
        self.workdir = Path(workdir)
        self.port = port or free_port()
        self.aof = aof
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        if REDIS_BIN is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        persistence = [str(REDIS_CONF)] if self.aof else []
        self.proc = subprocess.Popen(
            [
                REDIS_BIN,
                *persistence,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.aof else "no",
                "--dir",
                str(self.workdir),
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"redis-server exited at start (port {self.port}): {err}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer PING on port {self.port} within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL (a crash): with AOF, writes of the last second may be lost."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        if down_s:
            time.sleep(down_s)
        self.start()


class ServerThread:
    """uvicorn serving an app on a free loopback port, in a thread with its own event loop."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.app = app
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, name=f"uvicorn-{self.port}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def service(self) -> Any:
        return self.app.state.service

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class PacedChatModel:
    """A real chat model that waits ``delay_s`` before each streamed chunk (token latency), so a
    stream lasts long enough to cut. ``fail_after`` raises a transport error after that many
    chunks, like a model connection reset mid-answer."""

    def __init__(self, inner: Any, delay_s: float = 0.0) -> None:
        self.inner = inner
        self.delay_s = delay_s
        self.fail_after: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def chat(self, messages: Any, options: Any = None) -> Any:
        return await self.inner.chat(messages, options)

    async def chat_stream(self, messages: Any, options: Any = None) -> AsyncIterator[Any]:
        n = 0
        async for chunk in self.inner.chat_stream(messages, options):
            if self.fail_after is not None and n >= self.fail_after:
                raise ConnectionError("model connection reset mid-answer")
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            n += 1
            yield chunk


# -- SSE reading and comparison ------------------------------------------------------------------


@dataclass
class Frame:
    event: str
    data: dict[str, Any]
    raw: str = ""

    @property
    def type(self) -> str:
        return str(self.data.get("response_type"))


class _FrameParser:
    def __init__(self) -> None:
        self.event, self.data = "", None

    def feed(self, line: str) -> Frame | None:
        if line.startswith("event:"):
            self.event = line[len("event:") :]
        elif line.startswith("data:"):
            self.data = line[len("data:") :]
        elif line == "" and self.data is not None:
            frame = Frame(self.event, json.loads(self.data), self.data)
            self.event, self.data = "", None
            return frame
        return None


def iter_frames(lines: Iterator[str]) -> Iterator[Frame]:
    """SSE frames as they arrive (stop iterating to stop reading)."""
    parser = _FrameParser()
    for line in lines:
        frame = parser.feed(line)
        if frame is not None:
            yield frame


def parse_frames(lines: Iterator[str], limit: int | None = None) -> list[Frame]:
    """SSE frames from lines, stopping after ``limit`` frames (None: until the stream ends)."""
    frames: list[Frame] = []
    for frame in iter_frames(lines):
        frames.append(frame)
        if limit is not None and len(frames) >= limit:
            break
    return frames


async def aparse_frames(lines: AsyncIterator[str], limit: int | None = None) -> list[Frame]:
    parser, frames = _FrameParser(), []
    async for line in lines:
        frame = parser.feed(line)
        if frame is not None:
            frames.append(frame)
            if limit is not None and len(frames) >= limit:
                break
    return frames


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)


def frame_units(payloads: Sequence[dict[str, Any]]) -> list[tuple]:
    """What a client can observe, insensitive to how deltas were chunked: one unit per character
    of a delta, one unit (with its data) per other frame and per delta's done marker."""
    out: list[tuple] = []
    for p in payloads:
        kind = p.get("response_type")
        if kind in DELTA_TYPES:
            out.extend((kind, ch) for ch in p.get("content", ""))
            if p.get("done"):
                out.append((kind, "<done>", _canon(p.get("data") or {})))
        else:
            out.append(
                (
                    kind,
                    p.get("content"),
                    p.get("done"),
                    _canon(p.get("data") or {}),
                    _canon(p.get("knowledge_references") or []),
                )
            )
    return out


def log_units(events: Sequence[StreamEvent], request_id: str = "") -> list[tuple]:
    from rag_lab.stream.server import build_stream_response

    return frame_units(
        [json.loads(json.dumps(build_stream_response(e, request_id).to_dict(), default=str)) for e in events]
    )


def _event_unit_ends(events: Sequence[StreamEvent]) -> list[int]:
    """For each stored event, the index just past its last unit in ``log_units(events)``."""
    ends, n = [], 0
    for e in events:
        n += len(log_units([e]))
        ends.append(n)
    return ends


# -- the exercise --------------------------------------------------------------------------------


@dataclass
class StreamOutcome:
    session_id: str
    message_id: str = ""
    partial_reads: list[list[Frame]] = field(default_factory=list)
    final: list[Frame] = field(default_factory=list)
    disconnects: int = 0
    resumes: int = 0
    error: str = ""


@dataclass
class Report:
    backend: str
    streams: int = 0
    disconnects: int = 0
    resumes: int = 0
    events_stored: int = 0
    frames_read: int = 0
    events_lost: int = 0
    order_violations: int = 0
    incomplete: int = 0
    duplicated: int = 0
    answers_checked: int = 0
    answer_mismatches: int = 0
    errors: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def line(self) -> str:
        return (
            f"{self.backend:<8}{self.streams:>8}{self.disconnects:>12}{self.resumes:>9}{self.events_stored:>9}"
            f"{self.frames_read:>9}{self.events_lost:>8}{self.duplicated:>6}{self.order_violations:>8}"
            f"{self.incomplete:>12}{self.answer_mismatches:>6}/{self.answers_checked:<4}{self.wall_s:>8.1f}"
        )

    @staticmethod
    def header() -> str:
        return (
            f"{'backend':<8}{'streams':>8}{'disconnects':>12}{'resumes':>9}{'stored':>9}{'frames':>9}"
            f"{'lost':>8}{'dup':>6}{'order':>8}{'incomplete':>12}{'≠store':>11}{'wall s':>8}"
        )


async def exercise_stream(
    client: Any,
    urls: Sequence[str],
    session_id: str,
    question: str,
    kb: str,
    rng: random.Random,
    max_cycles: int,
    user: str = "bench",
) -> StreamOutcome:
    """Ask, cut, resume (partially) up to ``max_cycles - 1`` times, then resume to the end."""
    out = StreamOutcome(session_id)
    headers = {"X-User-ID": user}
    try:
        async with client.stream(
            "POST",
            f"{urls[0]}/knowledge-chat/{session_id}",
            headers=headers,
            json={"query": question, "knowledge_base_ids": [kb]},
        ) as r:
            if r.status_code != 200:
                out.error = f"ask: HTTP {r.status_code}: {(await r.aread())[:200]!r}"
                return out
            limit = rng.randint(1, 6)
            first = await aparse_frames(r.aiter_lines(), limit)
        out.partial_reads.append(first)
        out.message_id = str(first[0].data.get("assistant_message_id", "")) if first else ""
        if len(first) == limit and first[-1].type not in ("complete", "stop"):
            out.disconnects += 1
        for _ in range(rng.randint(1, max_cycles) - 1):
            await asyncio.sleep(rng.uniform(0, 0.05))
            async with client.stream(
                "GET",
                f"{rng.choice(urls)}/sessions/continue-stream/{session_id}",
                params={"message_id": out.message_id},
                headers=headers,
            ) as r:
                out.resumes += 1
                if r.status_code != 200:
                    out.error = f"resume: HTTP {r.status_code}"
                    return out
                limit = rng.randint(1, 8)
                part = await aparse_frames(r.aiter_lines(), limit)
            out.partial_reads.append(part)
            if len(part) == limit and part[-1].type not in ("complete", "stop"):
                out.disconnects += 1
        async with client.stream(
            "GET",
            f"{rng.choice(urls)}/sessions/continue-stream/{session_id}",
            params={"message_id": out.message_id},
            headers=headers,
        ) as r:
            out.resumes += 1
            if r.status_code != 200:
                out.error = f"final resume: HTTP {r.status_code}"
                return out
            out.final = await aparse_frames(r.aiter_lines())
    except Exception as exc:  # reported, not raised: one broken stream must not hide the others
        out.error = f"{type(exc).__name__}: {exc}"
    return out


def duplicated_events(log: Sequence[StreamEvent]) -> int:
    """Stored events whose append id was already seen earlier in the log."""
    seen: set[str] = set()
    dup = 0
    for e in log:
        if e.append_id and e.append_id in seen:
            dup += 1
        seen.add(e.append_id)
    return dup


def log_answer(log: Sequence[StreamEvent]) -> str:
    return "".join(e.content for e in log if e.type == "answer")


def check_answer(report: Report, log: Sequence[StreamEvent], saved: str | None, where: str) -> None:
    """Compare the answer in the log with the copy in the session store."""
    report.answers_checked += 1
    if saved is None or saved != log_answer(log):
        report.answer_mismatches += 1
        report.errors.append(f"{where}: the session store has {'no answer' if saved is None else 'another answer'}")


def saved_answer(lab: Any, session_id: str, message_id: str, wait_s: float = 5.0) -> str | None:
    """The assistant message the generation saved (waits a little: it is written after ``complete``)."""
    deadline = time.monotonic() + wait_s
    while True:
        msg = lab.sessions.find_message(session_id, message_id)
        if msg is not None or time.monotonic() > deadline:
            return msg.content if msg is not None else None
        time.sleep(0.05)


def check(report: Report, outcome: StreamOutcome, log: Sequence[StreamEvent]) -> None:
    """Add one stream's numbers to ``report`` (see the module docstring for the definitions)."""
    report.streams += 1
    report.duplicated += duplicated_events(log)
    report.disconnects += outcome.disconnects
    report.resumes += outcome.resumes
    report.events_stored += len(log)
    if outcome.error:
        report.errors.append(f"{outcome.session_id}: {outcome.error}")
    expected = log_units(log)
    for read in outcome.partial_reads:
        report.frames_read += len(read)
        got = frame_units([f.data for f in read])
        if got != expected[: len(got)]:
            report.order_violations += 1
    report.frames_read += len(outcome.final)
    got = frame_units([f.data for f in outcome.final])
    if got[: len(expected)] != expected[: len(got)]:
        report.order_violations += 1
    common = 0
    while common < min(len(got), len(expected)) and got[common] == expected[common]:
        common += 1
    report.events_lost += sum(1 for end in _event_unit_ends(log) if end > common)
    if not outcome.final or outcome.final[-1].type != "complete":
        report.incomplete += 1


async def run_reliability(
    urls: Sequence[str],
    read_log: Callable[[str, str], list[StreamEvent]],
    questions: Sequence[str],
    kb: str,
    n_streams: int = 50,
    max_cycles: int = 3,
    seed: int = 0,
    backend: str = "",
    prefix: str = "rel",
    read_answer: Callable[[str, str], str | None] | None = None,
) -> Report:
    """Run ``n_streams`` exercises at once against ``urls`` and check each against its log (and,
    with ``read_answer(session, message)``, the log's answer against the session store's)."""
    import httpx

    rng = random.Random(seed)
    report = Report(backend)
    t0 = time.perf_counter()
    limits = httpx.Limits(max_connections=4 * n_streams + 10, max_keepalive_connections=n_streams)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0), limits=limits) as client:
        outcomes = await asyncio.gather(
            *[
                exercise_stream(
                    client,
                    urls,
                    f"{prefix}-{i}",
                    questions[i % len(questions)],
                    kb,
                    random.Random(rng.random()),
                    max_cycles,
                )
                for i in range(n_streams)
            ]
        )
    report.wall_s = time.perf_counter() - t0
    for o in outcomes:
        log = read_log(o.session_id, o.message_id) if o.message_id else []
        check(report, o, log)
        if read_answer is not None and o.message_id:
            check_answer(report, log, read_answer(o.session_id, o.message_id), o.session_id)
    return report


# -- Redis restart while streams are generating ---------------------------------------------------


class CountingManager:
    """Wraps a StreamManager and counts appends per stream (attempted / failed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.attempted: dict[tuple[str, str], int] = {}
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        key = (session_id, message_id)
        self.attempted[key] = self.attempted.get(key, 0) + 1
        try:
            self.inner.append_event(session_id, message_id, event)
        except Exception:
            self.failed += 1
            raise

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]:
        return self.inner.get_events(session_id, message_id, from_offset)


async def _live_read(client: Any, url: str, session_id: str, question: str, kb: str) -> list[Frame]:
    async with client.stream(
        "POST",
        f"{url}/knowledge-chat/{session_id}",
        headers={"X-User-ID": "bench"},
        json={"query": question, "knowledge_base_ids": [kb]},
    ) as r:
        return await aparse_frames(r.aiter_lines())


def redis_restart_scenario(
    lab: Any, redis: RedisServer, questions: Sequence[str], kb: str, n: int = 10, after_s: float = 0.3
) -> dict[str, Any]:
    """``n`` live streams; Redis restarts ``after_s`` seconds in. Returns what survived: events
    lost (appended but not in Redis), duplicated, and answers that differ from the session store."""
    import httpx

    from rag_lab.stream.redis_manager import RedisStreamManager
    from rag_lab.stream.server import create_app

    prefix = f"restart-{'aof' if redis.aof else 'volatile'}-{time.time_ns()}"
    manager = CountingManager(RedisStreamManager(url=redis.url, prefix=prefix))
    from rag_lab.stream.factory import build_stream_directory

    app = create_app(lab, manager=manager, directory=build_stream_directory(manager.inner))  # type: ignore[arg-type]
    result: dict[str, Any] = {}
    with ServerThread(app) as srv:

        async def go() -> list[list[Frame]]:
            async with httpx.AsyncClient(timeout=60) as client:
                tasks = [
                    asyncio.create_task(_live_read(client, srv.url, f"{prefix}-{i}", questions[i % len(questions)], kb))
                    for i in range(n)
                ]
                await asyncio.sleep(after_s)
                await asyncio.to_thread(redis.restart)
                return await asyncio.gather(*tasks)

        t0 = time.perf_counter()
        reads = asyncio.run(go())
        result["wall_s"] = time.perf_counter() - t0
        gens = list(srv.service.generations.values())
        stored = attempted = duplicated = 0
        answers = Report("answers")
        for g in gens:
            log, _ = manager.get_events(g.session_id, g.message_id, 0)
            stored += len(log)
            duplicated += duplicated_events(log)
            attempted += manager.attempted.get((g.session_id, g.message_id), 0)
            check_answer(answers, log, saved_answer(lab, g.session_id, g.message_id), g.session_id)
        result.update(
            duplicated=duplicated,
            answers_checked=answers.answers_checked,
            answer_mismatches=answers.answer_mismatches,
            streams=n,
            live_reads_completed=sum(1 for r in reads if r and r[-1].type == "complete"),
            generations_completed=sum(1 for g in gens if g.run is not None and g.run.answer and not g.error),
            events_appended=attempted,
            appends_failed=manager.failed,
            events_kept=stored,
            events_lost=attempted - stored + duplicated,
        )
    return result


# -- main ----------------------------------------------------------------------------------------


def _lab(workspace: str, n_queries: int) -> tuple[Any, list[str]]:
    from rag_lab.eval.datasets import load_dataset
    from rag_lab.lab import Lab
    from rag_lab.lab.lab import CHAT_MODEL_ID

    ds = load_dataset("hotpotqa_hipporag100")
    queries = ds.queries[:n_queries]
    gold = {g for q in queries for g in q.gold_ids}
    docs = [{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus if d.id in gold]
    lab = Lab.from_config(workspace=workspace)
    lab.ingest_documents(docs, kb="bench", progress=False)
    questions = [q.question for q in queries]
    for q in questions:  # warm the embedding cache so both backends run on the same footing
        lab.ask(q, kb="bench", snapshots=False)
    lab.services.chat_models[CHAT_MODEL_ID] = PacedChatModel(lab.services.chat_models[CHAT_MODEL_ID], 0.02)
    return lab, questions


def main() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)  # the restart's "list shrank" warnings are expected
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.ERROR)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks.* and tests.* as packages
    if sys.argv[1:2] == ["--team"]:
        from benchmarks.replica_faults import team_rounds

        team_rounds(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
        return
    if sys.argv[1:2] == ["--soak"]:
        from benchmarks.stream_soak import soak

        soak(int(sys.argv[2]) if len(sys.argv) > 2 else 2000)
        return
    n_streams = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    max_cycles = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    from rag_lab.stream.factory import build_stream_directory
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.redis_manager import RedisStreamManager
    from rag_lab.stream.server import create_app

    with tempfile.TemporaryDirectory() as tmp:
        lab, questions = _lab(str(Path(tmp) / "ws"), 25)
        print(
            f"{n_streams} concurrent streams, up to {max_cycles} connections each (ask + resumes), "
            f"seed {seed}, model paced at 20 ms/chunk, {len(questions)} distinct questions"
        )
        print(Report.header())
        memory = MemoryStreamManager()
        with ServerThread(create_app(lab, manager=memory)) as srv:
            rep = asyncio.run(
                run_reliability(
                    [srv.url],
                    lambda s, m: memory.get_events(s, m, 0)[0],
                    questions,
                    "bench",
                    n_streams,
                    max_cycles,
                    seed,
                    "memory",
                    prefix="mem",
                    read_answer=lambda s, m: saved_answer(lab, s, m),
                )
            )
        print(rep.line())
        for e in rep.errors[:5]:
            print("  error:", e)
        if REDIS_BIN is None:
            print("redis   skipped: redis-server is not installed")
            return
        redis = RedisServer(Path(tmp) / "redis").start()
        try:
            a, b = RedisStreamManager(url=redis.url), RedisStreamManager(url=redis.url)
            # two replicas sharing one Redis; a Lab runs the generations of the replica they started on
            app_a = create_app(lab, manager=a, directory=build_stream_directory(a))
            with ServerThread(app_a) as srv_a:
                app_b = create_app(lab, manager=b, directory=build_stream_directory(b))
                # asks go to replica A (through its ordered background writer); resumes to A or B
                lab.stream_manager = app_a.state.service.manager
                with ServerThread(app_b) as srv_b:
                    rep = asyncio.run(
                        run_reliability(
                            [srv_a.url, srv_b.url],
                            lambda s, m: app_a.state.service.manager.get_events(s, m, 0)[0],
                            questions,
                            "bench",
                            n_streams,
                            max_cycles,
                            seed,
                            "redis",
                            prefix="red",
                            read_answer=lambda s, m: saved_answer(lab, s, m),
                        )
                    )
            print(rep.line())
            for e in rep.errors[:5]:
                print("  error:", e)
            volatile = RedisServer(Path(tmp) / "redis-volatile", aof=False).start()
            try:
                for server, label in ((redis, "AOF everysec"), (volatile, "--save '', no AOF")):
                    res = redis_restart_scenario(lab, server, questions, "bench")
                    print(
                        f"redis restart mid-stream ({res['streams']} streams, {label}): live SSE reads ended with "
                        f"complete {res['live_reads_completed']}/{res['streams']}, generations finished "
                        f"{res['generations_completed']}/{res['streams']}, events appended {res['events_appended']} "
                        f"(failed {res['appends_failed']}), kept {res['events_kept']}, lost {res['events_lost']}, "
                        f"duplicated {res['duplicated']}, stored answer = session store "
                        f"{res['answers_checked'] - res['answer_mismatches']}/{res['answers_checked']}, "
                        f"{res['wall_s']:.1f} s"
                    )
            finally:
                volatile.stop()
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
