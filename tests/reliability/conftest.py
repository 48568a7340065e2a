"""The reliability tests share the stream tests' loopback pieces (real redis-server, uvicorn)."""

from __future__ import annotations

from tests.stream.conftest import own_redis, redis_server, redis_url, volatile_redis  # noqa: F401
