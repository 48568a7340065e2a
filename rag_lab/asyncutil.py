"""Run a coroutine from synchronous code — also inside Jupyter, where a loop is already running
(then it runs on a helper thread with its own loop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class _Result:
    """The main task's result, with a constant ``repr``: at its end ``asyncio.run`` (3.11) formats
    the task, result included, while checking its SIGINT handler, and a lab run's full ``repr``
    (every snapshot) was a large part of ``lab.ask``'s overhead (``benchmarks/stage_overhead.py``)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coro: Any) -> _Result:
    return _Result(await coro)


def _run(coro_factory: Callable[[], Any]) -> Any:
    return asyncio.run(_boxed(coro_factory())).value


def run_sync(coro_factory: Callable[[], Any], thread_name: str = "rag_lab-run") -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
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
    return box["value"]
