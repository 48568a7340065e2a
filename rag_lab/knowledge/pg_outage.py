"""How long a PostgreSQL store waits for a server that is restarting (an outage), and which
errors are worth waiting for: used by :class:`~rag_lab.knowledge.sqldb.PgConnection`.

A connection refused, reset or closed by a server that is shutting down or starting up is
*transient*: it goes away when the server is back, so a reconnect is retried with backoff (0.05 s
doubling to 1 s) for up to the outage window. An error no wait cures (a wrong password, a missing
database, a bad URL) is raised at once. psycopg gives no SQLSTATE for a failed connection, only
libpq's message, so both are read.
"""

from __future__ import annotations

import logging
import os
import re
import select
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "DEFAULT_OUTAGE_S",
    "OUTAGE_ENV",
    "connect_waiting",
    "idle_connection_dead",
    "is_transient",
    "outage_window",
]

log = logging.getLogger("rag_lab.knowledge.sqldb")

T = TypeVar("T")

#: how long a dropped connection is retried while the server is unreachable (a restart)
DEFAULT_OUTAGE_S = 30.0
#: the environment variable that overrides :data:`DEFAULT_OUTAGE_S` (seconds, 0 to 3600)
OUTAGE_ENV = "RAG_LAB_STORE_OUTAGE_S"
#: errors of a server that is down, restarting or cut off: worth waiting for (psycopg gives no
#: SQLSTATE for a failed connection, only libpq's message)
_TRANSIENT = re.compile(
    r"Connection refused|starting up|shutting down|in recovery|server closed the connection|"
    r"Connection reset|terminating connection|could not receive data|could not send data|"
    r"timeout expired|No such file or directory|connection is lost|consuming input failed|"
    r"SSL SYSCALL|Broken pipe",
    re.IGNORECASE,
)
_TRANSIENT_STATES = ("57P01", "57P02", "57P03")


def outage_window(value: object = None, environ: Mapping[str, str] | None = None) -> float:
    """The outage window in seconds: ``value`` when given, else :data:`OUTAGE_ENV`, else
    :data:`DEFAULT_OUTAGE_S`; a value that is not a number in [0, 3600] raises ValueError naming it."""
    source = "store.outage_s"
    if value is None:
        raw = (os.environ if environ is None else environ).get(OUTAGE_ENV, "").strip()
        if not raw:
            return DEFAULT_OUTAGE_S
        value, source = raw, f"${OUTAGE_ENV}"
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if isinstance(value, bool) or not 0 <= seconds <= 3600:
        raise ValueError(f"{source}: expected a number of seconds in [0, 3600], got {value!r:.40}")
    return seconds


def is_transient(exc: BaseException) -> bool:
    """True for the errors of a server that is restarting or unreachable (module docstring)."""
    if getattr(exc, "sqlstate", None) in _TRANSIENT_STATES:
        return True
    return bool(_TRANSIENT.search(str(exc)))


def connect_waiting(connect: Callable[[], T], deadline: float, where: str) -> T:
    """``connect()``, retried with backoff while it fails with a transient error and
    ``time.monotonic()`` is before ``deadline``; the other errors and the last one are raised as
    they are. ``where`` names the server in the log (no password)."""
    delay, waited = 0.05, False
    while True:
        try:
            conn = connect()
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() + delay > deadline:
                raise
            if not waited:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                left = max(0.0, deadline - time.monotonic())
                log.warning("%s is unreachable (%s); retrying for up to %.0f s", where, first, left)
                waited = True
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            continue
        if waited:
            log.warning("%s is reachable again", where)
        return conn


def idle_connection_dead(raw: psycopg.Connection[object]) -> bool:
    """True when the idle psycopg connection ``raw`` cannot take a statement: closed, broken, or
    readable while idle (the server sent its goodbye, e.g. ``terminating connection due to
    administrator command``, and closed it), so nothing should be sent on it."""
    if raw.closed or raw.broken:
        return True
    try:
        readable, _, _ = select.select([raw.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
