"""KnowledgeQAByEvent: run the stage list, with progress windows, early references, cancellation
first, and the fallback answer when a stage finds nothing (spec §3.4–§3.6)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_lab.observability.ledger import reset_stage, set_stage
from rag_lab.observability.tracing import stage_attributes_after, stage_attributes_before
from rag_lab.pipeline.plugin import ErrSearchNothing, EventManager, PluginError
from rag_lab.pipeline.progress import ProgressTracker, is_consolidated_retrieval_stage, should_close_retrieval
from rag_lab.stream.bus import BusEventType, short_id
from rag_lab.types.chat_manage import ChatManage, has_knowledge_retrieval_scope
from rag_lab.types.events import EventType, build_pure_chat_pipeline, build_rag_pipeline

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import Services

E = EventType


class RequestCancelled(Exception):
    """The user stopped the request; no fallback, no error event (spec §3.4 step 8)."""


@dataclass(slots=True)
class StageTiming:
    """One stage's wall time. ``duration_ms`` runs from the stage's start until it returned or,
    when it left background work running (the answer stream: the model generates after the stage
    has returned), until that work finished, so the answer model's time shows in the stage that
    started it; ``background_ms`` is the part after the stage returned (0 when there was none)."""

    event: str
    started_at: float
    duration_ms: float
    error: str = ""
    error_type: str = ""
    background_ms: float = 0.0


def _time_background(timing: StageTiming, t0: float, tasks: list[asyncio.Future[object]]) -> None:
    """Extend ``timing`` to the end of the last of ``tasks`` (a done callback on each: it runs
    before anyone awaiting the tasks resumes, so the run's timings are final once they are awaited)."""
    returned_ms = timing.duration_ms

    def done(_: object) -> None:
        end_ms = (time.perf_counter() - t0) * 1000
        if end_ms > timing.duration_ms:
            timing.duration_ms = end_ms
            timing.background_ms = end_ms - returned_ms

    for task in tasks:
        task.add_done_callback(done)


#: called after each stage with (event, chat, error); may await (the lab's step-through pauses here)
StageHook = Callable[[EventType, ChatManage, "PluginError | None"], Awaitable[None]]


def build_event_list(chat: ChatManage) -> list[EventType]:
    """§3.3: pure chat without KB scope and web search, the RAG list otherwise."""
    r = chat.request
    has_kb = has_knowledge_retrieval_scope(r.search_targets, r.knowledge_base_ids, r.knowledge_ids)
    has_history = r.max_rounds > 0
    if not (has_kb or r.web_search_enabled):
        return build_pure_chat_pipeline(has_history)
    return build_rag_pipeline(has_history, r.web_search_enabled, r.data_analysis_enabled)


def emit_references(chat: ChatManage) -> None:
    """The references event goes out before the answer stream starts (§3.4 step 4)."""
    bus = chat.context.event_bus
    if bus is None or not chat.state.merge_result:
        return
    bus.emit(
        BusEventType.REFERENCES,
        {"references": [r.copy() for r in chat.state.merge_result], "iteration": 0},
        event_id=f"{short_id()}-references",
    )


async def knowledge_qa_by_event(
    chat: ChatManage,
    events: list[EventType],
    manager: EventManager,
    services: Services,
    timings: list[StageTiming] | None = None,
    on_stage: StageHook | None = None,
) -> PluginError | None:
    """Trigger ``events`` in order. Returns the failing stage's error, or None.

    Raises :class:`RequestCancelled` when the request's cancel event is set after a stage.
    """
    from rag_lab.pipeline.fallback import handle_fallback_response

    timings = timings if timings is not None else []
    progress = ProgressTracker(chat)
    retrieval_stages = [e for e in events if is_consolidated_retrieval_stage(e, chat)]
    last_retrieval = retrieval_stages[-1] if retrieval_stages else None

    for event in events:
        if event == E.QUERY_UNDERSTAND and (chat.request.enable_rewrite or chat.request.images):
            progress.open_query_understand()
        if is_consolidated_retrieval_stage(event, chat) and progress.retrieval_window is None:
            progress.open_retrieval()
        if event == E.CHAT_COMPLETION_STREAM:
            emit_references(chat)

        started = time.time()
        t0 = time.perf_counter()
        n_background = len(chat.context.background_tasks)
        stage_token = set_stage(str(event))
        try:
            with services.tracer.span(f"pipeline.{event}") as span:
                if services.tracer.enabled:
                    span.set_attributes(stage_attributes_before(chat, str(event)))
                err = await manager.trigger(event, chat)
                if services.tracer.enabled:
                    span.set_attributes(stage_attributes_after(chat, str(event)))
                    if err is not None:
                        span.record_error(err.error_type, str(err))
        finally:
            reset_stage(stage_token)
        timing = StageTiming(
            str(event),
            started,
            (time.perf_counter() - t0) * 1000,
            str(err) if err else "",
            err.error_type if err else "",
        )
        timings.append(timing)
        left = [t for t in chat.context.background_tasks[n_background:] if isinstance(t, asyncio.Future)]
        if left:
            _time_background(timing, t0, left)

        if event == E.QUERY_UNDERSTAND:
            progress.close_query_understand(err)
        if progress.retrieval_window is not None and should_close_retrieval(event, last_retrieval, err):
            progress.close_retrieval(err)
        if on_stage is not None:
            await on_stage(event, chat, err)

        if chat.context.cancelled():  # before ErrSearchNothing: a stop is not "found nothing"
            progress.close_all(None)
            raise RequestCancelled(str(event))
        if err is ErrSearchNothing:
            progress.close_all(err)
            await handle_fallback_response(chat, services)
            return None
        if err is not None:
            progress.close_all(err)
            return err
    progress.close_all(None)
    return None


async def wait_background(chat: ChatManage) -> None:
    """Wait for the tasks a stage left running (the answer stream, a model fallback).

    No time limit of its own (the optional ``timeout`` it took was never passed): the tasks carry
    their stages' limits, which apply to remote models only (a remote answer stream's
    ``chat_stream_idle_timeout_s``), so an in-process answerer on a loaded machine is waited for
    instead of being cut off (:mod:`rag_lab.models.timeouts`)."""
    tasks = [t for t in chat.context.background_tasks if isinstance(t, asyncio.Task)]
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
