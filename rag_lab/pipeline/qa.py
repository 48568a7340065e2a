"""One question end to end: bus, stream handler, orchestrator, answer stream (spec §3.1 steps 3–9)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from rag_lab.pipeline.container import Services
from rag_lab.pipeline.orchestrator import (
    RequestCancelled,
    StageHook,
    StageTiming,
    build_event_list,
    knowledge_qa_by_event,
    wait_background,
)
from rag_lab.pipeline.plugin import EventManager, PluginError
from rag_lab.stream.bus import BusEvent, BusEventType, EventBus
from rag_lab.stream.handler import AgentStreamHandler
from rag_lab.stream.manager import StreamManager
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.stream import ResponseType, StreamEvent


@dataclass
class QAOutcome:
    events: list[EventType]
    error: PluginError | None
    cancelled: bool
    timings: list[StageTiming] = field(default_factory=list)
    answer: str = ""
    is_fallback: bool = False
    completed: bool = False
    total_ms: float = 0.0
    #: the chat model's failure when the answer fell back because of it ("" otherwise)
    model_error: str = ""
    #: the ``complete`` event held back (``hold_complete``): the caller stores it after the turn
    held: list[StreamEvent] = field(default_factory=list)


async def run_knowledge_qa(
    chat: ChatManage,
    services: Services,
    manager: EventManager,
    stream_manager: StreamManager,
    on_stage: StageHook | None = None,
    on_bus_event: Callable[[BusEvent], None] | None = None,
    events: list[EventType] | None = None,
    hold_complete: bool = False,
) -> QAOutcome:
    """Run the pipeline for ``chat`` and wait until the answer stream has finished. ``events``
    overrides the stage list (a re-run from a stage passes the tail of the original list).
    ``hold_complete``: the terminal ``complete`` event is returned in :attr:`QAOutcome.held`
    instead of stored (the caller saves the turn first, then stores it)."""
    t0 = time.perf_counter()
    session_id = chat.request.session_id or str(uuid.uuid4())
    chat.request.session_id = session_id
    if not chat.context.message_id:
        chat.context.message_id = str(uuid.uuid4())
    message_id = chat.context.message_id
    stream_manager.append_event(
        session_id,
        message_id,
        StreamEvent(
            f"query-{time.time_ns()}",
            ResponseType.AGENT_QUERY.value,
            "",
            True,
            data={"session_id": session_id, "assistant_message_id": message_id},
        ),
    )
    bus = EventBus()
    chat.context.event_bus = bus
    handler = AgentStreamHandler(stream_manager, session_id, message_id)
    handler.hold_complete = hold_complete
    handler.subscribe(bus)
    if on_bus_event is not None:
        bus.on_any(on_bus_event)

    outcome = QAOutcome(
        events=list(events) if events is not None else build_event_list(chat), error=None, cancelled=False
    )

    def on_final_answer(ev: BusEvent) -> None:
        outcome.answer += str(ev.data.get("content", ""))
        outcome.is_fallback = outcome.is_fallback or bool(ev.data.get("is_fallback"))
        if ev.data.get("done") and not outcome.completed:
            outcome.completed = True
            bus.emit(
                BusEventType.AGENT_COMPLETE,
                {
                    "session_id": session_id,
                    "total_steps": len(outcome.timings),
                    "final_answer": outcome.answer,
                    "total_duration_ms": int((time.perf_counter() - t0) * 1000),
                    "message_id": "",
                },
            )

    bus.on(BusEventType.FINAL_ANSWER, on_final_answer)
    with services.tracer.span("pipeline.request", {"session.id": session_id, "message.id": message_id}) as span:
        try:
            outcome.error = await knowledge_qa_by_event(
                chat, outcome.events, manager, services, outcome.timings, on_stage
            )
            if outcome.error is not None:
                span.record_error(outcome.error.error_type, str(outcome.error))
                bus.emit(
                    BusEventType.ERROR,
                    {
                        "error": str(outcome.error),
                        "error_code": outcome.error.error_type,
                        "stage": "knowledge_qa_execution",
                    },
                )
            await wait_background(chat)
        except RequestCancelled:
            await wait_background(chat)  # the stream flushes its decoders before the turn is saved
            span.set_attribute("request.cancelled", True)
    outcome.cancelled = chat.context.cancelled()
    outcome.model_error = str(chat.state.diagnostics.get("model_error") or "")
    outcome.total_ms = (time.perf_counter() - t0) * 1000
    outcome.held = handler.held
    return outcome
