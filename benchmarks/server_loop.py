"""Does the chat server's event loop stay free while many streams run? /health latency and time to
the first frame with N concurrent streams, memory and Redis logs, side by side with the previous
design (the pipeline's Redis appends made synchronously on the event loop).

Usage: .venv/bin/python benchmarks/server_loop.py [N_STREAMS] [SECONDS_PER_CHUNK]

For each setup it starts the server on loopback (uvicorn in a process of its own, so that the
client's work here does not share the server's interpreter lock), sends N_STREAMS asks at once
(the offline extractive answerer paced at SECONDS_PER_CHUNK per streamed chunk, default 0.02),
and polls /health every 50 ms until every stream ended. It prints per setup: /health p50 / p95 /
max (ms), first-frame p50 / p95 (s) and the wall time. Setups:

* ``memory``: the in-memory log (appends are a list append under a lock), with the generations on
  the server's loop (the previous design) and on their own loop thread (the current one,
  :mod:`rag_lab.stream.pipeline_loop`);
* ``redis, appends on the loop``: two designs ago, the lab's stream manager left unwrapped, so
  each answer chunk is a blocking RPUSH inside the event loop (generations on the server's loop);
* ``redis, writer``: the ordered background writer (:mod:`rag_lab.stream.appender`), with the
  generations on the server's loop and on their own loop thread (the current design).

Results depend on the machine's load: run it on a quiet machine and record ``uptime``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.stream_reliability import REDIS_BIN, RedisServer, _lab  # noqa: E402


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def _run(url: str, questions: list[str], n: int) -> dict[str, Any]:
    import httpx

    health: list[float] = []
    first: list[float] = []
    done = asyncio.Event()

    async def poll(c: httpx.AsyncClient) -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            await c.get(f"{url}/health")
            health.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(0.05)

    async def ask(c: httpx.AsyncClient, i: int) -> None:
        t0 = time.perf_counter()
        body = {"query": questions[i % len(questions)], "kb": "bench"}
        async with c.stream("POST", f"{url}/knowledge-chat/loop-{i}", json=body) as r:
            seen = False
            async for line in r.aiter_lines():
                if not seen and line.startswith("data:"):
                    first.append(time.perf_counter() - t0)
                    seen = True

    limits = httpx.Limits(max_connections=n + 8)
    async with httpx.AsyncClient(timeout=600, limits=limits) as c, httpx.AsyncClient(timeout=600) as hc:
        t0 = time.perf_counter()
        poller = asyncio.create_task(poll(hc))
        await asyncio.gather(*(ask(c, i) for i in range(n)))
        done.set()
        await poller
        wall = time.perf_counter() - t0
    return {"health": health, "first": first, "wall": wall}


def _line(name: str, r: dict[str, Any]) -> str:
    h, f = r["health"], r["first"]
    return (
        f"{name:<32} /health p50 {statistics.median(h):7.1f} ms  p95 {_pct(h, 0.95):7.1f}  max {max(h):7.1f}  "
        f"first frame p50 {statistics.median(f):6.2f} s  p95 {_pct(f, 0.95):6.2f}  wall {r['wall']:6.1f} s"
    )


#: (label, stream log, generations on their own loop thread); the log: memory, Redis left
#: unwrapped (appends on the loop, two designs ago) or Redis behind the ordered writer
SETUPS = (
    ("memory, pipeline on the loop", "memory", False),
    ("memory, pipeline thread", "memory", True),
    ("redis, appends on the loop", "redis-raw", False),
    ("redis, writer, pipeline on loop", "redis", False),
    ("redis, writer, pipeline thread", "redis", True),
)


def _serve(workspace: str, log: str, thread: bool, pace: float, redis_url: str, port: int, ready: Any) -> None:
    """The server of one setup, in a process of its own (so its event loop shares the interpreter
    lock with nothing of the client's, as for a remote client): the lab on the ingested workspace,
    uvicorn on ``port``; ``ready`` gets True once it serves."""
    import logging

    from rag_lab.lab.lab import CHAT_MODEL_ID
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.redis_manager import RedisStreamManager
    from rag_lab.stream.server import create_app
    from rag_lab.stream.server_sse import StreamServerSettings

    logging.basicConfig(level=logging.ERROR)
    lab, _ = _lab(workspace, 25)  # the KB is already ingested: this warms the caches
    lab.services.chat_models[CHAT_MODEL_ID].delay_s = pace
    prefix = f"{log}-{int(thread)}"
    manager = MemoryStreamManager() if log == "memory" else RedisStreamManager(url=redis_url, prefix=prefix)
    app = create_app(lab, manager=manager, settings=StreamServerSettings(pipeline_thread=thread))
    if log == "redis-raw":
        lab.stream_manager = manager  # the pipeline's appends go straight to Redis, on its loop
    run_server(app, port, ready)


def run_server(app: Any, port: int, ready: Any) -> None:
    """uvicorn serving ``app`` on 127.0.0.1:``port`` in this process until it is ended; ``ready``
    (a multiprocessing queue) gets True once it serves."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        ready.put(True)
        await task

    asyncio.run(serve())


def main() -> None:
    import logging
    import multiprocessing

    from benchmarks.stream_reliability import free_port

    logging.basicConfig(level=logging.ERROR)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    pace = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        ws = str(Path(tmp) / "ws")
        _, questions = _lab(ws, 25)  # ingest once; each server process opens the same workspace
        print(
            f"{n} concurrent streams, model paced at {pace * 1000:.0f} ms/chunk, {len(questions)} distinct "
            "questions; each server in a process of its own, the client here"
        )
        redis = RedisServer(Path(tmp) / "redis").start() if REDIS_BIN is not None else None
        try:
            for label, log, thread in SETUPS:
                if log != "memory" and redis is None:
                    print(f"{label}: skipped, redis-server is not installed")
                    continue
                port, ready = free_port(), ctx.Queue()
                args = (ws, log, thread, pace, redis.url if redis else "", port, ready)
                proc = ctx.Process(target=_serve, args=args, daemon=True)
                proc.start()
                try:
                    ready.get(timeout=300)
                    print(_line(label, asyncio.run(_run(f"http://127.0.0.1:{port}", questions, n))), flush=True)
                finally:
                    proc.terminate()
                    proc.join(10)
                    ready.close()
                    ready.join_thread()
        finally:
            if redis is not None:
                redis.stop()


if __name__ == "__main__":
    main()
