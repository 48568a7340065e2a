"""run_sync: asyncio.run's semantics (result, errors, leftover tasks cancelled, thread calls
finished before it returns) with threads reused across calls."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rag_lab.asyncutil import run_sync


def test_result_and_errors_come_back():
    async def double(x):
        return 2 * await asyncio.to_thread(lambda: x)

    async def fail():
        await asyncio.to_thread(lambda: None)
        raise ValueError("bad input 7")

    assert run_sync(lambda: double(21)) == 42
    with pytest.raises(ValueError, match="bad input 7"):
        run_sync(fail)


def test_threads_are_reused_across_calls():
    async def workers():
        return {await asyncio.to_thread(threading.current_thread) for _ in range(5)}

    from rag_lab.asyncutil import _shared_pool

    run_sync(workers)
    pool = _shared_pool()
    seen = set()  # the Thread objects themselves (an OS thread id may be reused after a thread ends)
    for _ in range(20):
        seen |= run_sync(workers)
    # every call ran on the one shared pool's threads (asyncio.run used to start a new pool, hence
    # new threads, on every call). Not "no new thread": a pool may add one when a finished worker
    # has not yet marked itself idle, which is ThreadPoolExecutor's own timing.
    assert _shared_pool() is pool
    assert seen <= set(pool._threads) and len(pool._threads) <= pool._max_workers
    names = run_sync(lambda: asyncio.to_thread(lambda: threading.current_thread().name))
    assert names.startswith("rag_lab")


def test_thread_calls_finish_before_it_returns_and_leftover_tasks_are_cancelled():
    done = threading.Event()
    cancelled = []

    def slow():
        time.sleep(0.2)
        done.set()

    async def leftover():
        try:
            await asyncio.to_thread(slow)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main():
        asyncio.get_running_loop().create_task(leftover())
        await asyncio.sleep(0.01)  # the task has sent slow() to a thread
        return "main done"

    assert run_sync(main) == "main done"
    assert cancelled == [True] and done.is_set()


def test_inside_a_running_loop_it_runs_on_a_helper_thread():
    async def outer():
        async def inner():
            await asyncio.sleep(0)
            return threading.current_thread().name

        return run_sync(inner)

    assert asyncio.run(outer()) == "rag_lab-run"


def test_an_error_is_not_chained_to_the_loop_probe():
    async def fail():
        raise KeyError("missing 7")

    with pytest.raises(KeyError) as info:
        run_sync(fail)
    assert info.value.__context__ is None  # not "during handling of RuntimeError: no running event loop"
