"""Run a coroutine from synchronous code — also inside Jupyter, where a loop is already running
(then it runs on a helper thread with its own loop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


def run_sync(coro_factory: Callable[[], Any], thread_name: str = "rag_lab-run") -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_factory())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro_factory())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, name=thread_name)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
