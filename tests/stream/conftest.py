"""Fixtures for the stream tests: a real redis-server on loopback, the chat server on loopback,
a lab on the shared tiny corpus. The loopback pieces (RedisServer, ServerThread, PacedChatModel,
the SSE frame parser) live in benchmarks/stream_reliability.py, which the tests share.

redis-server: the tests start their own, with the shipped ``config/redis-stream.conf`` (AOF,
``appendfsync everysec``) in a temporary folder on a free 127.0.0.1 port; ``volatile_redis`` is one
without any persistence, for the tests of what a Redis that loses its data does. ``own_pg`` is a
PostgreSQL server of one test's own, for the store outage tests. When the binary is missing the Redis tests are skipped with the reason,
except under ``CI`` where a missing redis-server is a failure (CI installs it with apt).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.stream_reliability import (  # the harness the benchmark and these tests share
    REDIS_BIN,
    PacedChatModel,
    RedisServer,
    ServerThread,
    free_port,
)

__all__ = ["PacedChatModel", "RedisServer", "ServerThread", "free_port", "wait_until"]


def _need_redis() -> None:
    if REDIS_BIN is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed; CI must install it (apt-get install -y redis-server)")
        pytest.skip("redis-server is not installed (apt-get install -y redis-server); Redis tests skipped")
    try:
        import redis  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("the 'redis' package is not installed; Redis tests skipped")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory) -> Iterator[RedisServer]:
    """One redis-server for the session (tests flush it before use)."""
    _need_redis()
    srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield srv
    srv.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def own_redis(tmp_path) -> Iterator[RedisServer]:
    """A redis-server (AOF) for one test (for restarts that must not disturb the others)."""
    _need_redis()
    srv = RedisServer(tmp_path / "redis").start()
    yield srv
    srv.stop()


@pytest.fixture
def own_pg():
    """A PostgreSQL server for one test (tests/pg_server.py), which it may stop and start."""
    from tests.pg_server import PostgresServer, need_postgres

    need_postgres()
    srv = PostgresServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def volatile_redis(tmp_path) -> Iterator[RedisServer]:
    """A redis-server without persistence: a restart empties it."""
    _need_redis()
    srv = RedisServer(tmp_path / "redis", aof=False).start()
    yield srv
    srv.stop()


# -- the lab and the chat server ---------------------------------------------------------------


@pytest.fixture(scope="session")
def stream_lab(tmp_path_factory, docs_dir):
    """A lab on the four tiny docs (KB ``demo``) whose chat model is paced."""
    from rag_lab.lab import Lab
    from rag_lab.lab.lab import CHAT_MODEL_ID

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("stream_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    paced = PacedChatModel(lab.services.chat_models[CHAT_MODEL_ID])
    lab.services.chat_models[CHAT_MODEL_ID] = paced
    lab.paced = paced
    return lab


@pytest.fixture
def paced(stream_lab) -> Iterator[PacedChatModel]:
    """The lab's paced model, reset to no delay and no failure after each test."""
    yield stream_lab.paced
    stream_lab.paced.delay_s = 0.0
    stream_lab.paced.fail_after = None


@pytest.fixture
def serve(stream_lab, paced):
    """``serve(manager=None, **settings)`` starts the chat server for the lab; stopped at teardown."""
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.server import StreamServerSettings, create_app

    started: list[ServerThread] = []

    def start(manager: Any = None, directory: Any = None, server: Any = None, **settings: Any) -> ServerThread:
        app = create_app(
            stream_lab,
            manager=manager or MemoryStreamManager(),
            directory=directory,
            settings=StreamServerSettings(**settings),
            server=server,
        )
        srv = ServerThread(app).__enter__()
        started.append(srv)
        return srv

    yield start
    for srv in reversed(started):
        srv.__exit__(None, None, None)


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
