"""Step through one question stage by stage.

The pipeline runs on its own thread and event loop and pauses after every stage; ``next()``
(plain code) or ``await anext()`` (Jupyter, asyncio) lets it run one more stage and returns what
that stage left in ChatManage. Works the same in scripts and notebooks.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack, cast

from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.ask_options import StepOptions
    from rag_lab.lab.lab import Lab, Run


@dataclass
class StageView:
    event: str
    state: ChatManage

    def __repr__(self) -> str:
        s = self.state.state
        return (
            f"StageView({self.event}: search={len(s.search_result)} rerank={len(s.rerank_result)} "
            f"merge={len(s.merge_result)})"
        )


class Stepper:
    def __init__(
        self, lab: Lab, question: str, kb: str | list[str] | None = None, **kwargs: Unpack[StepOptions]
    ) -> None:
        self._out: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.stages: list[StageView] = []
        self.run: Run | None = None
        self._done = False
        #: the paused run's loop and the event that lets it go on (set from the caller's thread)
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

        async def pause(event: EventType, snap: ChatManage) -> None:
            # Waits on the run's own loop, not on a worker thread: an abandoned Stepper leaves only
            # its daemon thread behind, which never holds up the interpreter's exit.
            go = asyncio.Event()
            self._waiter = (asyncio.get_running_loop(), go)
            self._out.put(("stage", StageView(str(event), snap)))
            await go.wait()

        def target() -> None:
            try:
                run = asyncio.run(lab.aask(question, kb, pause=pause, **kwargs))
                self._out.put(("done", run))
            except BaseException as exc:  # surfaced by next()
                self._out.put(("error", exc))

        self._thread = threading.Thread(target=target, name="rag_lab-step", daemon=True)
        self._thread.start()
        self._started = False

    @property
    def done(self) -> bool:
        return self._done

    @property
    def state(self) -> ChatManage | None:
        """ChatManage after the last stage that ran."""
        return self.stages[-1].state if self.stages else None

    def next(self) -> StageView | Run:
        """Run one more stage; returns its view, or the finished Run after the last stage."""
        if self._done:
            raise StopIteration("the run is finished: see .run")
        if self._started and self._waiter is not None:
            loop, go = self._waiter
            self._waiter = None
            loop.call_soon_threadsafe(go.set)
        self._started = True
        kind, value = self._out.get()
        if kind == "stage":
            self.stages.append(value)
            return cast("StageView | Run", value)
        self._done = True
        if kind == "error":
            raise value
        self.run = value
        return cast("StageView | Run", value)

    async def anext(self) -> StageView | Run:
        return await asyncio.to_thread(self.next)

    def run_to(self, stage: EventType | str) -> StageView:
        """Run until ``stage`` has finished."""
        while True:
            got = self.next()
            if isinstance(got, StageView) and got.event == str(stage):
                return got
            if self._done:
                raise ValueError(f"stage '{stage}' did not run; stages: {[s.event for s in self.stages]}")

    def finish(self) -> Run:
        while not self._done:
            self.next()
        assert self.run is not None
        return self.run
