"""Does the chat server's event loop stay free while many streams run? /health latency and time to
the first frame with N concurrent streams, memory and Redis logs, side by side with the previous
design (the pipeline's Redis appends made synchronously on the event loop).

Usage: .venv/bin/python benchmarks/server_loop.py [N_STREAMS] [SECONDS_PER_CHUNK]

For each setup it starts the server on loopback (uvicorn in a thread), sends N_STREAMS asks at once
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

from benchmarks.stream_reliability import REDIS_BIN, RedisServer, ServerThread, _lab  # noqa: E402


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
        f"{name:<30} /health p50 {statistics.median(h):7.1f} ms  p95 {_pct(h, 0.95):7.1f}  max {max(h):7.1f}  "
        f"first frame p50 {statistics.median(f):6.2f} s  p95 {_pct(f, 0.95):6.2f}  wall {r['wall']:6.1f} s"
    )


def main() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    pace = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
    from rag_lab.lab.lab import CHAT_MODEL_ID
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.redis_manager import RedisStreamManager
    from rag_lab.stream.server import create_app

    from rag_lab.stream.server_sse import StreamServerSettings

    on_loop = StreamServerSettings(pipeline_thread=False)  # the previous design: generations on the server's loop
    with tempfile.TemporaryDirectory() as tmp:
        lab, questions = _lab(str(Path(tmp) / "ws"), 25)
        lab.services.chat_models[CHAT_MODEL_ID].delay_s = pace
        print(f"{n} concurrent streams, model paced at {pace * 1000:.0f} ms/chunk, {len(questions)} distinct questions")
        with ServerThread(create_app(lab, manager=MemoryStreamManager(), settings=on_loop)) as srv:
            print(_line("memory, pipeline on the loop", asyncio.run(_run(srv.url, questions, n))))
        with ServerThread(create_app(lab, manager=MemoryStreamManager())) as srv:
            print(_line("memory, pipeline thread", asyncio.run(_run(srv.url, questions, n))))
        if REDIS_BIN is None:
            print("redis skipped: redis-server is not installed")
            return
        redis = RedisServer(Path(tmp) / "redis").start()
        try:
            raw = RedisStreamManager(url=redis.url, prefix="old")
            with ServerThread(create_app(lab, manager=raw, settings=on_loop)) as srv:
                lab.stream_manager = raw  # two designs ago: the pipeline appends on the loop
                print(_line("redis, appends on the loop", asyncio.run(_run(srv.url, questions, n))))
            writer = RedisStreamManager(url=redis.url, prefix="writer")
            with ServerThread(create_app(lab, manager=writer, settings=on_loop)) as srv:
                print(_line("redis, writer, pipeline on loop", asyncio.run(_run(srv.url, questions, n))))
            wrapped = RedisStreamManager(url=redis.url, prefix="new")
            with ServerThread(create_app(lab, manager=wrapped)) as srv:
                print(_line("redis, writer, pipeline thread", asyncio.run(_run(srv.url, questions, n))))
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
