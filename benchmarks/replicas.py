"""Several ``rag-lab serve`` processes sharing one state: a PostgreSQL store and Redis streams.

The harness the two-replica test (``tests/stream/test_stream_two_replicas.py``) and the
throughput figures of ``benchmarks/scale_out.py --part replicas`` share:

* :func:`write_config`: the lab YAML of one replica (its own workspace folder for index files and
  caches, the shared ``store``, optional API keys and chat model);
* :class:`ServeReplica`: ``python -m rag_lab.cli --config … serve --port … --stream-manager
  redis://…`` as a subprocess, started and stopped, with its stderr kept for the error message;
* :func:`start_all`: start several at once (their start-ups overlap) and wait for each
  ``/health``;
* :class:`MilvusLiteServer`: ``python -m milvus_lite server`` on a loopback port, the Milvus
  every replica reaches over gRPC (a Milvus Lite ``.db`` file opens in one process only; its
  server mode serves several).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["MilvusLiteServer", "ServeReplica", "start_all", "write_config"]


def write_config(
    path: Path,
    workspace: Path,
    dsn: str,
    *,
    api_keys: Mapping[str, Any] | None = None,
    chat: Mapping[str, Any] | None = None,
    engine: Mapping[str, Any] | None = None,
) -> Path:
    """Write one replica's lab YAML to ``path``; returns ``path``."""
    cfg: dict[str, Any] = {"workspace": str(workspace), "store": {"type": "postgres", "dsn": dsn}}
    if engine:
        cfg["engine"] = dict(engine)
    if api_keys:
        cfg["server"] = {"api_keys": dict(api_keys)}
    if chat:
        cfg["models"] = {"chat": dict(chat)}
    path.write_text(yaml.safe_dump(cfg, sort_keys=True), encoding="utf-8")
    return path


class ServeReplica:
    """One ``rag-lab serve`` subprocess on ``127.0.0.1:port``."""

    def __init__(self, config: Path, port: int, stream_manager: str) -> None:
        self.cmd = [
            sys.executable,
            "-m",
            "rag_lab.cli",
            "--config",
            str(config),
            "serve",
            "--port",
            str(port),
            "--stream-manager",
            stream_manager,
            "--log-level",
            "warning",
        ]
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    def launch(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=self._log, env=env, cwd=ROOT)

    def stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-12000:]

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"rag-lab serve on port {self.port} exited:\n{self.stderr()}")
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"rag-lab serve on port {self.port} did not answer /health in {timeout_s:.0f} s")

    def stop(self) -> None:
        _stop(self.proc)
        self._log.close()


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    """End a server process: SIGTERM, then SIGKILL when it has not exited within 15 s."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def start_all(replicas: Sequence[ServeReplica]) -> None:
    """Launch every replica, then wait for each (stopping them all when one fails)."""
    for r in replicas:
        r.launch()
    try:
        for r in replicas:
            r.wait_ready()
    except BaseException:
        for r in replicas:
            r.stop()
        raise


class MilvusLiteServer:
    """Milvus Lite's gRPC server on ``127.0.0.1:port`` with its data in ``data_dir``."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.data_dir, self.port = Path(data_dir), port
        self.uri = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()

    def start(self, timeout_s: float = 60.0) -> MilvusLiteServer:
        import socket

        cmd = [sys.executable, "-m", "milvus_lite", "server", "--data-dir", str(self.data_dir)]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._log.seek(0)
                raise RuntimeError(f"milvus_lite server exited: {self._log.read().decode('utf-8', 'replace')[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"milvus_lite server did not listen on {self.port} in {timeout_s:.0f} s")

    def stop(self) -> None:
        _stop(self.proc)
        self._log.close()


# -- throughput: one replica vs two on the same machine -------------------------------------------


async def _ask(client: Any, url: str, question: str) -> float:
    """One ask on a new session, read to the end of its SSE stream; its latency in seconds."""
    import uuid

    t0 = time.perf_counter()
    async with client.stream(
        "POST", f"{url}/knowledge-chat/bench-{uuid.uuid4().hex}", json={"query": question, "kb": "bench"}
    ) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{url}: ask answered {r.status_code}: {(await r.aread())[:300]!r}")
        tail = b""
        async for chunk in r.aiter_bytes():
            tail = (tail + chunk)[-4096:]
        if b'"response_type":"complete"' not in tail:
            raise RuntimeError(f"{url}: the stream ended without complete: {tail[-300:]!r}")
    return time.perf_counter() - t0


async def _round(urls: Sequence[str], questions: Sequence[str], concurrency: int) -> tuple[float, list[float]]:
    """Every question once, ``concurrency`` at a time, sent to ``urls`` in turn: (wall s, latencies)."""
    import asyncio

    import httpx

    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, q: str) -> float:
        async with gate:
            return await _ask(client, urls[i % len(urls)], q)

    async with httpx.AsyncClient(timeout=120) as client:
        t0 = time.perf_counter()
        latencies = await asyncio.gather(*(one(i, q) for i, q in enumerate(questions)))
        return time.perf_counter() - t0, list(latencies)


def bench_replicas(n_asks: int, concurrency: int) -> None:
    """Print the asks per second of one ``rag-lab serve`` replica and of two sharing PostgreSQL
    and Redis on this machine (offline models: extractive answerer, ONNX MiniLM embeddings and
    re-scorer), for ``n_asks`` HotpotQA questions ``concurrency`` at a time, and their ratio."""
    import asyncio
    import json
    import shutil
    import statistics

    sys.path.insert(0, str(ROOT))
    from benchmarks.stream_reliability import RedisServer, free_port
    from rag_lab.lab import Lab
    from tests.pg_server import PostgresServer

    data = ROOT / "datasets" / "hotpotqa_distractor40"
    docs = [json.loads(line) for line in (data / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
    questions = [
        json.loads(line)["question"]
        for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if line
    ]
    asks = [questions[i % len(questions)] for i in range(n_asks)]
    print(
        f"== rag-lab serve replicas over PostgreSQL + Redis: {len(docs)} HotpotQA documents, {n_asks} asks, {concurrency} concurrent"
    )
    tmp = Path(tempfile.mkdtemp(prefix="rag_lab_bench_replicas_"))
    pg = PostgresServer().start()
    redis = RedisServer(tmp / "redis").start()
    replicas: list[ServeReplica] = []
    try:
        dsn = pg.new_database("bench")
        lab = Lab.from_config({"store": {"type": "postgres", "dsn": dsn}}, workspace=tmp / "ingest")
        t0 = time.perf_counter()
        lab.ingest_documents(docs, kb="bench", progress=False)
        print(f"ingest into PostgreSQL: {time.perf_counter() - t0:.1f} s")
        lab.workspace.close()
        lab.sessions.close()
        for name in ("a", "b"):  # each replica's folder starts with the index files the store matches
            shutil.copytree(tmp / "ingest", tmp / name)
            cfg = write_config(tmp / f"{name}.yaml", tmp / name, dsn)
            replicas.append(ServeReplica(cfg, free_port(), redis.url))
        start_all(replicas)
        urls = [r.url for r in replicas]
        for url in urls:  # each replica answers every question once first: equally warm caches
            asyncio.run(_round([url], questions, concurrency))
        results: dict[str, list[float]] = {"one replica": [], "two replicas": []}
        for _ in range(2):  # alternated, so that drift in the machine's load hits both alike
            for label, targets in (("one replica", urls[:1]), ("two replicas", urls)):
                wall, lat = asyncio.run(_round(targets, asks, concurrency))
                results[label].append(n_asks / wall)
                print(
                    f"{label:>12}: {n_asks / wall:6.2f} asks/s  ({wall:5.1f} s wall; latency p50 "
                    f"{statistics.median(lat) * 1e3:.0f} ms, max {max(lat) * 1e3:.0f} ms)"
                )
        one, two = (statistics.mean(results[k]) for k in ("one replica", "two replicas"))
        print(f"mean: one replica {one:.2f} asks/s, two replicas {two:.2f} asks/s")
        print(f"ratio two/one: {two / one:.2f}  (cores here: {os.cpu_count()})")
    finally:
        for r in replicas:
            r.stop()
        redis.stop()
        pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
