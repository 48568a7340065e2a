"""Run a coroutine from synchronous code — also inside Jupyter, where a loop is already running
(then it runs on a helper thread with its own loop).

Each call runs its coroutine as ``asyncio.run`` does (a new loop, leftover tasks cancelled, async
generators closed, the calls it sent to threads finished before it returns), except that those
calls run on a process-wide thread pool: ``asyncio.run`` started a pool per call and joined its
threads at the end, ~1–4 ms per ``lab.ask`` on a loaded 2-core machine
(``benchmarks/stage_overhead.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")


class _Result(Generic[R]):
    """The main task's result, with a constant ``repr``: at its end ``asyncio.run`` (3.11) formats
    the task, result included, while checking its SIGINT handler, and a lab run's full ``repr``
    (every snapshot) was a large part of ``lab.ask``'s overhead (``benchmarks/stage_overhead.py``)."""

    __slots__ = ("value",)

    def __init__(self, value: R) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coro: Awaitable[R]) -> _Result[R]:
    return _Result(await coro)


_POOL_LOCK = threading.Lock()
_POOL: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None  # (pid, pool): a forked child makes its own


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="rag_lab"))
        return _POOL[1]


class _LoopExecutor(concurrent.futures.ThreadPoolExecutor):
    """The default executor of one :func:`run_sync` loop: calls go to the shared pool, and the
    loop's shutdown waits for its own calls only, leaving the pool's threads for the next run."""

    def __init__(self, pool: concurrent.futures.ThreadPoolExecutor) -> None:
        super().__init__(max_workers=1)  # asyncio accepts ThreadPoolExecutors only; starts no thread
        self._pool = pool
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._pending_lock = threading.Lock()

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> concurrent.futures.Future[R]:
        future = self._pool.submit(fn, *args, **kwargs)
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._pending_lock:
            pending = list(self._pending)
        if cancel_futures:
            for future in pending:
                future.cancel()
        if wait:
            concurrent.futures.wait(pending)


def _run(coro_factory: Callable[[], Awaitable[R]]) -> R:
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(_LoopExecutor(_shared_pool()))
        return runner.run(_boxed(coro_factory())).value


def run_sync(coro_factory: Callable[[], Awaitable[R]], thread_name: str = "rag_lab-run") -> R:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        in_loop = False
    else:
        in_loop = True
    if not in_loop:
        # outside the ``except``: run there, the whole run was "during handling" of the
        # RuntimeError (chained into every error's traceback, a reference cycle per call)
        return _run(coro_factory)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = _run(coro_factory)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name=thread_name)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return cast(R, box["value"])


def synchronous(afunc: Callable[P, Awaitable[R]], thread_name: str = "rag_lab-run") -> Callable[P, R]:
    """The blocking twin of the coroutine function ``afunc``, named without its leading ``a``: each
    call runs ``afunc`` with :func:`run_sync` (so also where a loop is running, e.g. Jupyter)."""

    @functools.wraps(afunc)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return run_sync(lambda: afunc(*args, **kwargs), thread_name)

    call.__name__ = afunc.__name__.removeprefix("a")
    call.__qualname__ = afunc.__qualname__.removeprefix("a")
    call.__doc__ = (
        f"Synchronous :func:`{afunc.__name__}` (also callable where an event loop is running, e.g. "
        "Jupyter: it then runs in a helper thread)."
    )
    return call
