"""Server memory over a soak of many streams and the idle period after it
(``benchmarks/stream_reliability.py --soak N``).

The chat server runs in a process of its own (so the client's objects are not counted), with
the offline models paced at 20 ms per chunk, a stream TTL of ``ttl_s`` and finished generations
kept ``keep_s`` seconds. Its RSS is read (psutil) after a warm-up of 50 asks, after the soak of
``n`` asks (``concurrency`` at a time) and after an idle period past the TTL; with the memory
log and with Redis (the logs then live in Redis, not in the server).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

__all__ = ["soak"]


def _serve(workspace: str, backend: str, redis_url: str, port: int, ttl_s: float, keep_s: float, ready: Any) -> None:
    import logging

    from benchmarks.server_loop import run_server
    from benchmarks.stream_reliability import _lab
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.redis_manager import RedisStreamManager
    from rag_lab.stream.server import create_app
    from rag_lab.stream.server_sse import StreamServerSettings

    logging.basicConfig(level=logging.ERROR)
    lab, _ = _lab(workspace, 25)
    manager: Any = (
        MemoryStreamManager(ttl_s=ttl_s)
        if backend == "memory"
        else RedisStreamManager(url=redis_url, prefix=f"soak-{port}", ttl_s=max(1, int(ttl_s)))
    )
    settings = StreamServerSettings(keep_finished_s=keep_s, heartbeat_s=0.5)
    run_server(create_app(lab, manager=manager, settings=settings), port, ready)


async def _asks(url: str, questions: list[str], n: int, concurrency: int) -> int:
    import httpx

    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(i: int) -> None:
        nonlocal done
        async with gate:
            body = {"query": questions[i % len(questions)], "knowledge_base_ids": ["bench"]}
            async with client.stream("POST", f"{url}/knowledge-chat/soak-{i}", json=body) as r:
                tail = b""
                async for chunk in r.aiter_bytes():
                    tail = (tail + chunk)[-2048:]
                done += b'"response_type":"complete"' in tail

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=concurrency + 5)) as client:
        await asyncio.gather(*(one(i) for i in range(n)))
    return done


def soak(n: int, ttl_s: float = 20.0, keep_s: float = 5.0, concurrency: int = 20) -> None:
    import multiprocessing
    import tempfile

    import psutil

    from benchmarks.stream_reliability import REDIS_BIN, RedisServer, _lab, free_port

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        ws = str(Path(tmp) / "ws")
        _, questions = _lab(ws, 25)
        redis = RedisServer(Path(tmp) / "redis").start() if REDIS_BIN is not None else None
        try:
            for backend in ("memory", "redis") if redis is not None else ("memory",):
                port, ready = free_port(), ctx.Queue()
                args = (ws, backend, redis.url if redis else "", port, ttl_s, keep_s, ready)
                proc = ctx.Process(target=_serve, args=args, daemon=True)
                proc.start()
                try:
                    ready.get(timeout=600)
                    url = f"http://127.0.0.1:{port}"
                    rss = psutil.Process(proc.pid).memory_info
                    asyncio.run(_asks(url, questions, 50, concurrency))
                    start = rss().rss
                    t0 = time.perf_counter()
                    ok = asyncio.run(_asks(url, questions, n, concurrency))
                    wall = time.perf_counter() - t0
                    peak = rss().rss
                    time.sleep(ttl_s + keep_s + 5)  # idle past the TTL and the keep time
                    idle = rss().rss
                    mb = 1 / (1 << 20)
                    print(
                        f"{backend:6} soak: {ok}/{n} streams complete in {wall:.0f} s; server RSS after warm-up "
                        f"{start * mb:.0f} MB, after the soak {peak * mb:.0f} MB (+{(peak - start) * mb:.0f}), after "
                        f"{ttl_s + keep_s + 5:.0f} s idle {idle * mb:.0f} MB ({(idle - start) / start * 100:+.1f} % of "
                        f"the start; TTL {ttl_s:.0f} s, finished generations kept {keep_s:.0f} s)",
                        flush=True,
                    )
                finally:
                    proc.terminate()
                    proc.join(10)
        finally:
            if redis is not None:
                redis.stop()
