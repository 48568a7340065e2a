"""Build the StreamManager named by the config or the environment (spec §8.1, seed factory.go).

Config (the lab YAML's ``stream_manager`` key) wins over the environment, field by field:

* ``"memory"`` / ``{"type": "memory"}``: :class:`MemoryStreamManager` (the default);
* ``"redis"``, a ``redis://`` URL, or ``{"type": "redis", "url": ..., "addr": "host:port",
  "username": ..., "password": ..., "db": 0, "prefix": "stream:events", "ttl_s": 3600}``.

Environment (used for whatever the config leaves out): ``STREAM_MANAGER_TYPE`` (``memory`` |
``redis``), ``REDIS_ADDR`` (``host:port``), ``REDIS_USERNAME``, ``REDIS_PASSWORD``, ``REDIS_DB``
(default 0) and ``REDIS_PREFIX`` (default ``stream:events``). The TTL is 1 hour as the spec's
factory wires it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rag_lab.stream.manager import MemoryStreamDirectory, MemoryStreamManager, StreamDirectory, StreamManager
from rag_lab.stream.redis_manager import DEFAULT_PREFIX, DEFAULT_TTL_S

TYPES = ("memory", "redis")
_KEYS = {"type", "url", "addr", "username", "password", "db", "prefix", "ttl_s"}
_URL_SCHEMES = ("redis://", "rediss://", "unix://")


class StreamManagerConfigError(ValueError):
    """The stream manager config or environment is invalid; the message names the field."""


@dataclass(frozen=True)
class StreamManagerSettings:
    """The resolved settings (config over environment over defaults)."""

    type: str = "memory"
    url: str = ""
    prefix: str = DEFAULT_PREFIX
    ttl_s: int = DEFAULT_TTL_S
    username: str | None = None
    password: str | None = None

    def describe(self) -> str:
        """For logs and the serve banner: never shows the password."""
        if self.type == "memory":
            return "memory"
        from rag_lab.stream.redis_manager import redact_url

        return f"redis {redact_url(self.url)} (prefix {self.prefix!r}, ttl {self.ttl_s} s)"


def _int(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise StreamManagerConfigError(f"{field}: expected an integer >= {minimum}, got {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise StreamManagerConfigError(f"{field}: expected an integer >= {minimum}, got {value!r}") from None
    if n < minimum or (isinstance(value, float) and value != n):
        raise StreamManagerConfigError(f"{field}: expected an integer >= {minimum}, got {value!r}")
    return n


def resolve_settings(config: object = None, env: Mapping[str, str] | None = None) -> StreamManagerSettings:
    """Merge ``config`` (None, a type name, a redis URL or a mapping) with ``env``."""
    env = os.environ if env is None else env
    if config is None:
        cfg: dict[str, object] = {}
    elif isinstance(config, str):
        text = config.strip()
        cfg = {"type": "redis", "url": text} if text.startswith(_URL_SCHEMES) else {"type": text}
    elif isinstance(config, Mapping):
        cfg = dict(config)
    else:
        raise StreamManagerConfigError(
            f"stream_manager: expected 'memory', 'redis', a redis:// URL or a mapping, got {type(config).__name__}"
        )
    unknown = sorted(set(cfg) - _KEYS)
    if unknown:
        raise StreamManagerConfigError(
            f"stream_manager: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}"
        )
    if "type" in cfg:
        kind, field = cfg["type"], "stream_manager.type"
    else:
        kind, field = env.get("STREAM_MANAGER_TYPE") or "memory", "STREAM_MANAGER_TYPE"
    kind = str(kind).strip().lower()
    if kind not in TYPES:
        raise StreamManagerConfigError(f"{field}: unknown stream manager {kind!r}; expected one of {', '.join(TYPES)}")
    if kind == "memory":
        extra = sorted(set(cfg) - {"type"})
        if extra:
            raise StreamManagerConfigError(f"stream_manager: key(s) {', '.join(extra)} only apply to type 'redis'")
        return StreamManagerSettings()

    def pick(key: str, env_name: str | None, default: Any = None) -> tuple[Any, str]:
        if cfg.get(key) is not None:
            return cfg[key], f"stream_manager.{key}"
        if env_name and env.get(env_name):
            return env[env_name], env_name
        return default, f"stream_manager.{key}"

    username, _ = pick("username", "REDIS_USERNAME")
    password, _ = pick("password", "REDIS_PASSWORD")
    prefix, prefix_field = pick("prefix", "REDIS_PREFIX", DEFAULT_PREFIX)
    if not isinstance(prefix, str) or not prefix.strip():
        raise StreamManagerConfigError(f"{prefix_field}: expected a non-empty string, got {prefix!r}")
    ttl_raw, _ = pick("ttl_s", None, DEFAULT_TTL_S)
    ttl_s = _int(ttl_raw, "stream_manager.ttl_s", 1)
    if cfg.get("url"):
        url = str(cfg["url"]).strip()
        if not url.startswith(_URL_SCHEMES):
            raise StreamManagerConfigError(f"stream_manager.url: expected redis://, rediss:// or unix://, got {url!r}")
        if cfg.get("db") is not None or cfg.get("addr") is not None:
            raise StreamManagerConfigError(
                "stream_manager: give either url or addr/db, not both (put the database in the URL: redis://host:port/1)"
            )
    else:
        db_raw, db_field = pick("db", "REDIS_DB", 0)
        db = _int(db_raw, db_field, 0)
        addr, addr_field = pick("addr", "REDIS_ADDR", "127.0.0.1:6379")
        addr = str(addr).strip()
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise StreamManagerConfigError(f"{addr_field}: expected host:port, got {addr!r}")
        url = f"redis://{addr}/{db}"
    return StreamManagerSettings("redis", url, prefix, ttl_s, username or None, password or None)


def build_stream_manager(
    config: object = None, env: Mapping[str, str] | None = None, *, check: bool = False
) -> StreamManager:
    """The StreamManager for ``config`` / ``env``. With ``check``, a Redis backend is pinged now so
    that a wrong address fails at start-up with a clear message rather than at the first event."""
    settings = resolve_settings(config, env)
    if settings.type == "memory":
        return MemoryStreamManager()
    from rag_lab.stream.redis_manager import RedisStreamManager

    try:
        manager = RedisStreamManager(
            url=settings.url,
            prefix=settings.prefix,
            ttl_s=settings.ttl_s,
            username=settings.username,
            password=settings.password,
        )
    except ImportError:
        raise StreamManagerConfigError(
            "stream_manager: type 'redis' needs the 'redis' package (pip install 'redis>=5')"
        ) from None
    if check:  # one quick try (no backoff window): a wrong address should fail at once
        from rag_lab.stream.redis_manager import make_client, redact_url

        probe = make_client(
            settings.url, username=settings.username, password=settings.password, retries=0, socket_timeout_s=2.0
        )
        try:
            probe.ping()
        except Exception as exc:
            raise StreamManagerConfigError(
                f"stream_manager: cannot reach Redis at {redact_url(settings.url)}: {exc}"
            ) from None
        finally:
            probe.close()
    return manager


def build_stream_directory(manager: StreamManager) -> StreamDirectory:
    """The ownership directory that lives beside ``manager`` (Redis next to Redis)."""
    from rag_lab.stream.redis_manager import RedisStreamDirectory, RedisStreamManager

    if isinstance(manager, RedisStreamManager):
        return RedisStreamDirectory(manager.client, manager.prefix, manager.ttl_s)
    return MemoryStreamDirectory()
