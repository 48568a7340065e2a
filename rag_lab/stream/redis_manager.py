"""StreamManager on Redis lists (spec §8.1 "Redis backend").

One list per (session, message) under ``<prefix>:<session>:<message>``: ``append_event`` is RPUSH
of the event as JSON plus EXPIRE (the TTL is refreshed on every append), ``get_events`` is LRANGE
from the offset to the end. Several server replicas sharing one Redis see the same logs, so a
client can resume on any replica and a stop written on one replica reaches the generation running
on another.

The client is the synchronous ``redis`` client: the pipeline's stream handler appends from inside
the (synchronous) event bus, and one RPUSH on loopback takes well under a millisecond. Readers in
async code call ``get_events`` through ``asyncio.to_thread``.

Two behaviours beyond the spec, both for a Redis that lost data (restart without persistence,
``FLUSHALL``, expiry):

* a read at an offset past the end of the list means the list was cut and started again, so the
  read restarts at 0 and returns everything now stored (the spec would return nothing until the
  new list grew past the old offset, silently skipping those events). A reader cannot tell a cut
  from normal growth when more than ``from_offset`` events were appended after the cut before its
  next read; docs/streams.md says what is lost;
* connection errors are retried with exponential backoff (a restarting server comes back within
  the retry window). Appends are idempotent: a Lua script pushes an event only if its
  ``append_id`` is not yet in the stream's id set (``<prefix>#ids:<session>:<message>``, same TTL),
  so an append retried after a lost reply is stored once.

Stop is final: the same script stores a ``stop`` event together with a stop mark
(``<prefix>#stop:<session>:<message>``, same TTL) and refuses every later append to that stream,
so a replica still generating when another one stopped the stream cannot add an answer delta
after the ``stop`` (it learns of the stop from the log a moment later). Check and append are one
atomic script: no append can slip between them.

Durability is Redis's: run it with the shipped ``config/redis-stream.conf`` (AOF,
``appendfsync everysec``) and a restart loses nothing; without persistence it loses everything.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from rag_lab.types.params import PipelineParams
from rag_lab.types.stream import STOP_RESPONSE_TYPE, StreamEvent

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "stream:events"
#: TTL the factory wires (spec §8.1: 1 h)
DEFAULT_TTL_S: int = PipelineParams.model_fields["stream_ttl_s"].default
DEFAULT_URL = "redis://127.0.0.1:6379/0"

#: KEYS[1] the event list, KEYS[2] its append-id set, KEYS[3] its stop mark; ARGV: append id,
#: event JSON, TTL seconds, "1" for a stop event. Returns 1 stored, 0 already stored, 2 refused
#: (the stream was stopped: nothing is stored after its stop, whichever replica appends)
_APPEND_ONCE = """
if redis.call('EXISTS', KEYS[3]) == 1 then
  return 2
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
if ARGV[4] == '1' then
  redis.call('SET', KEYS[3], '1', 'EX', ARGV[3])
end
return 1
"""


def json_default(obj: object) -> object:
    """numpy scalars / arrays, sets, dataclass-like objects: encode what JSON cannot."""
    if hasattr(obj, "item") and callable(obj.item):
        try:
            return obj.item()
        except (ValueError, TypeError):
            pass
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)


def redact_url(url: str) -> str:
    """``redis://user:secret@host:port/0`` → ``redis://user:***@host:port/0`` (for logs)."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def encode_event(event: StreamEvent) -> str:
    return json.dumps(event.to_dict(), ensure_ascii=False, separators=(",", ":"), default=json_default)


def decode_event(raw: bytes | str) -> StreamEvent | None:
    """The stored JSON back to an event; ``None`` when it is not a JSON object with a string
    ``type`` (what a reader could not route)."""
    try:
        d = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(d, dict) or not isinstance(d.get("type"), str):
        return None
    try:
        return StreamEvent.from_dict(d)
    except (TypeError, ValueError):
        return None


def make_client(
    url: str = DEFAULT_URL,
    *,
    username: str | None = None,
    password: str | None = None,
    db: int | None = None,
    retries: int = 6,
    socket_timeout_s: float = 5.0,
) -> redis.Redis:
    """A ``redis.Redis`` for ``url`` that retries connection errors with backoff (~2.5 s total)."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry

    kwargs: dict[str, object] = {
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError, ConnectionResetError],
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": socket_timeout_s,
        "health_check_interval": 30,
    }
    if username:
        kwargs["username"] = username
    if password:
        kwargs["password"] = password
    if db is not None:
        kwargs["db"] = db
    return redis.Redis.from_url(url, **kwargs)


class RedisStreamManager:
    """Append-only event logs in Redis lists (see the module docstring)."""

    def __init__(
        self,
        client: redis.Redis | None = None,
        *,
        url: str = DEFAULT_URL,
        prefix: str = DEFAULT_PREFIX,
        ttl_s: int = DEFAULT_TTL_S,
        **client_kwargs: Any,
    ) -> None:
        if int(ttl_s) <= 0:
            raise ValueError(f"ttl_s must be > 0 seconds, got {ttl_s!r}")
        if not prefix:
            raise ValueError("prefix must not be empty")
        self.client = client if client is not None else make_client(url, **client_kwargs)
        self.url = url
        self.prefix = prefix
        self.ttl_s = int(ttl_s)
        self._append_once: Script | None = None  # registered on first use (EVALSHA, reloaded after a restart)
        #: appends refused because their stream was stopped
        self.refused_after_stop = 0

    def __repr__(self) -> str:
        return f"RedisStreamManager(url={redact_url(self.url)!r}, prefix={self.prefix!r}, ttl_s={self.ttl_s})"

    def key(self, session_id: str, message_id: str) -> str:
        return f"{self.prefix}:{session_id}:{message_id}"

    def ping(self) -> bool:
        return bool(self.client.ping())

    def close(self) -> None:
        self.client.close()

    def append_event(self, session_id: str, message_id: str, event: StreamEvent) -> None:
        """RPUSH the JSON event and refresh the key's TTL, atomically, at most once per
        ``event.append_id`` and never after the stream's ``stop`` (a Lua script; see the module
        docstring)."""
        event.stamp()
        key = self.key(session_id, message_id)
        ids = f"{self.prefix}#ids:{session_id}:{message_id}"
        stop = f"{self.prefix}#stop:{session_id}:{message_id}"
        if self._append_once is None:
            self._append_once = self.client.register_script(_APPEND_ONCE)
        is_stop = "1" if str(event.type) == STOP_RESPONSE_TYPE else "0"
        done = self._append_once(
            keys=[key, ids, stop], args=[event.append_id, encode_event(event), self.ttl_s, is_stop]
        )
        if done == 2:
            self.refused_after_stop += 1
            log.debug("stream %s is stopped: a %s event was not stored", key, event.type)

    def is_stopped(self, session_id: str, message_id: str) -> bool:
        """Whether the stream holds a ``stop`` (its stop mark exists): one EXISTS, where reading
        the new events would move and decode them (a stop watcher's check)."""
        return bool(self.client.exists(f"{self.prefix}#stop:{session_id}:{message_id}"))

    def get_events(self, session_id: str, message_id: str, from_offset: int = 0) -> tuple[list[StreamEvent], int]:
        """Events from ``from_offset`` on and the next offset (``from + raw count``); entries that
        do not decode are skipped but still counted."""
        key = self.key(session_id, message_id)
        start = max(0, int(from_offset))
        pipe = self.client.pipeline(transaction=True)
        pipe.llen(key)
        pipe.lrange(key, start, -1)
        length, raw = pipe.execute()
        if start > 0 and length < start:
            # the list is shorter than what this reader already consumed: it was cut (restart
            # without persistence, expiry) and started again; everything in it is new
            log.warning("stream %s shrank below offset %d (now %d events): reading it from 0", key, start, length)
            start = 0
            raw = self.client.lrange(key, 0, -1)
        events: list[StreamEvent] = []
        for item in raw:
            ev = decode_event(item)
            if ev is None:
                log.warning("stream %s: skipping an entry that is not a JSON event", key)
                continue
            events.append(ev)
        return events, start + len(raw)

    def delete(self, session_id: str, message_id: str) -> None:
        self.client.delete(
            self.key(session_id, message_id),
            f"{self.prefix}#ids:{session_id}:{message_id}",
            f"{self.prefix}#stop:{session_id}:{message_id}",
        )


class RedisStreamDirectory:
    """Session owners and message request ids in the same Redis as the event logs.

    Owners never expire (a session must not change hands when its streams expire); request ids
    expire with the stream TTL. Keys use ``#`` after the prefix, which the HTTP layer forbids in
    session and message ids, so they cannot collide with event-log keys.
    """

    def __init__(self, client: redis.Redis, prefix: str = DEFAULT_PREFIX, ttl_s: int = DEFAULT_TTL_S) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = int(ttl_s)

    @staticmethod
    def _str(value: object) -> str | None:
        if value is None:
            return None
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    def claim_session(self, session_id: str, user_id: str) -> str:
        key = f"{self.prefix}#owner:{session_id}"
        pipe = self.client.pipeline(transaction=True)
        pipe.setnx(key, user_id)
        pipe.get(key)
        _, owner = pipe.execute()
        return self._str(owner) or user_id

    def session_owner(self, session_id: str) -> str | None:
        return self._str(self.client.get(f"{self.prefix}#owner:{session_id}"))

    def record_message(self, session_id: str, message_id: str, request_id: str) -> None:
        self.client.set(f"{self.prefix}#request:{session_id}:{message_id}", request_id, ex=self.ttl_s)

    def message_request_id(self, session_id: str, message_id: str) -> str | None:
        return self._str(self.client.get(f"{self.prefix}#request:{session_id}:{message_id}"))
