"""The chat server's generations run on their own event loop, in one background thread, so the
server's loop only serves HTTP: ``/health``, new asks, stops and the SSE frames.

The pipeline's stages do Python work between their awaits (fusion, rerank, merge, the offline
models' tokenising). On the server's loop, 50 running generations delay every other request by
the sum of those slices; on this loop the server's loop waits at most for the interpreter's
switch interval (``sys.getswitchinterval()``, 5 ms) before it runs again.

What crosses between the loops:

* the generation itself: :meth:`PipelineLoop.run` submits a coroutine factory and awaits its
  result from the caller's loop; cancelling the awaiting task cancels the coroutine;
* the stop: the caller's :class:`asyncio.Event` is forwarded to an event of the pipeline loop
  (``call_soon_threadsafe``), which the pipeline awaits (an :class:`asyncio.Event` may only be
  set from the loop it waits on);
* the events: written by the pipeline to the stream log (thread-safe: the memory log locks, the
  Redis log has its ordered writer) and read back by the followers, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["PipelineLoop"]

T = TypeVar("T")


class PipelineLoop:
    """One daemon thread running an event loop; started on first use, ended by :meth:`close`."""

    def __init__(self, name: str = "rag-lab-pipeline") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def loop(self) -> asyncio.AbstractEventLoop:
        """The pipeline's loop, started in its thread when needed."""
        with self._lock:
            if self._loop is None or not self.running:
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()
                    # close: what is left is cancelled and awaited, then the loop closes
                    pending = asyncio.all_tasks(loop)
                    for task in pending:
                        task.cancel()
                    if pending:
                        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()

                self._thread = threading.Thread(target=serve, name=self.name, daemon=True)
                self._thread.start()
                started.wait()
                self._loop = loop
            return self._loop

    async def run(self, make: Callable[[asyncio.Event], Awaitable[T]], cancel: asyncio.Event | None = None) -> T:
        """``await make(stop)`` on the pipeline loop, from the caller's loop. ``stop`` is set (on
        the pipeline loop) once ``cancel`` is set on the caller's; cancelling the caller's task
        cancels the pipeline's coroutine (which then ends on its own loop)."""
        loop = self.loop()
        inner = asyncio.Event()  # binds to the pipeline loop when the pipeline first waits on it
        if cancel is not None and cancel.is_set():
            inner.set()

        async def body() -> T:
            return await make(inner)

        future = asyncio.run_coroutine_threadsafe(body(), loop)
        result: asyncio.Future[T] = asyncio.wrap_future(future)
        watch: asyncio.Future[Any] | None = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
        try:
            while watch is not None and not watch.done():
                done, _ = await asyncio.wait({result, watch}, return_when=asyncio.FIRST_COMPLETED)
                if watch in done:
                    loop.call_soon_threadsafe(inner.set)
                if result in done:
                    break
            value: T = await result
            return value
        except asyncio.CancelledError:
            future.cancel()  # cancels the coroutine's task on the pipeline loop
            raise
        finally:
            if watch is not None and not watch.done():
                watch.cancel()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop: running coroutines are cancelled and awaited, then the thread ends."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # already closed
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
