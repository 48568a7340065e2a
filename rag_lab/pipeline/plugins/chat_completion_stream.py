"""CHAT_COMPLETION_STREAM: start the model stream, consume it in the background, decode citations
across chunk boundaries and emit thinking / answer events (spec §4.12.3).

The stage returns as soon as the stream has started; the request waits for
``chat.context.background_tasks``. The stage's timing still covers generation: the orchestrator
extends a stage's ``StageTiming`` to the end of the background tasks it left
(``background_ms``), so the answer model's work (the extractive answerer's embedding) shows here.

When the model fails — the stream cannot start, the connection breaks, an ``error`` chunk is not
followed by a finished answer within ``model_failure_deadline_s``, or the stream ends without a
done chunk — the ``error`` event goes out as the spec says, and then (beyond the spec, which
leaves the turn without an answer) the fallback answer: the partial text is kept and the
fallback (the references found, or the fixed text, ``model_failure_answer``) follows as a done
``final_answer`` with ``is_fallback``, so the turn completes and ``Run.error`` names the failure.
A stop is not a failure: a cancelled stream ends without any fallback.

Time limits (``models.chat.timeout_s`` for connecting and the first chunk,
``chat_stream_idle_timeout_s`` between chunks, ``model_failure_deadline_s`` for a
stream to recover from an error chunk) apply to a remote model only: an in-process model (the
extractive answerer) is waited for however long it takes, so a loaded machine never turns an
offline answer into a fallback (:mod:`rag_lab.models.timeouts`). An idle remote stream fails
with a :class:`~rag_lab.models.timeouts.ModelTimeout` naming the stage, the param and the seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from rag_lab.models.timeouts import ModelTimeout, is_in_process
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.fallback import emit_model_failure_fallback
from rag_lab.pipeline.plugin import ErrGetChatModel, ErrModelCall, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.common import (
    CHAT_COMPLETION_READS,
    chat_options,
    prepare_messages_with_history,
    prepare_messages_with_model_context,
)
from rag_lab.stream.bus import BusEventType, EventBus, short_id
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import ChatDiagnostics
from rag_lab.types.events import EventType

if TYPE_CHECKING:
    from rag_lab.modelcontext.stream import StreamDecoder as _StreamDecoder
    from rag_lab.models.base import StreamChunk
    from rag_lab.pipeline.container import TracerService

log = logging.getLogger(__name__)

TRUNCATION_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})
TRUNCATED_EMPTY_MESSAGE = (
    "The model reached its output limit before writing an answer. Ask a shorter question or raise "
    "max_completion_tokens."
)


class PluginChatCompletionStream(StagePlugin):
    events = (EventType.CHAT_COMPLETION_STREAM,)
    contract = StageContract(
        reads=(
            "context.background_tasks",
            "context.cancel_event",
            "context.event_bus",
            "request.fallback_response",
            *CHAT_COMPLETION_READS,
        ),
        writes=(
            "context.background_tasks",
            "state.chat_response",
            "state.diagnostics.chat_messages",
            "state.diagnostics.model_error",
            "state.diagnostics.usage",
        ),
        params=(
            "chat_stream_idle_timeout_s",
            "model_failure_answer",
            "model_failure_deadline_s",
            "web_snippet_max_runes",
        ),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        from rag_lab.modelcontext import StreamDecoder

        bus = chat.context.event_bus
        if bus is None:
            return ErrModelCall.with_error(RuntimeError("EventBus is required for streaming"))
        try:
            model = self.services.get_chat_model(chat.request.chat_model_id)
        except Exception as exc:
            return ErrGetChatModel.with_error(exc)
        messages, registry = prepare_messages_with_model_context(chat, prepare_messages_with_history(chat))
        chat.state.diagnostics["chat_messages"] = ChatDiagnostics(
            messages=[{"role": m.role, "content": m.content} for m in messages]
        )
        try:
            stream = model.chat_stream(messages, chat_options(chat))
        except Exception as exc:
            stream, start_error = None, f"{type(exc).__name__}: {exc}"
        else:
            start_error = "" if stream is not None else "the model returned no stream"
        if stream is None:  # the model is down: answer with the fallback rather than nothing
            log.warning("answer stream did not start: %s", start_error)
            bus.emit(
                BusEventType.ERROR,
                {"error": start_error, "stage": "chat_completion_stream"},
                event_id=f"{short_id()}-error",
            )
            emit_model_failure_fallback(chat, start_error)
            return await next()
        lifetime = self.services.tracer.start_span(
            "pipeline.chat_completion_stream.lifetime", {"chat.model_id": chat.request.chat_model_id}
        )
        task = asyncio.ensure_future(
            consume_stream(
                chat,
                bus,
                stream,
                StreamDecoder(registry),
                StreamDecoder(registry),
                self.services.tracer,
                lifetime,
                in_process=is_in_process(model),
                first_chunk_s=getattr(model, "timeout_s", None),
            )
        )
        chat.context.background_tasks.append(task)
        return await next()


async def _next_chunk(
    iterator: AsyncIterator[StreamChunk], timeout: float | None, cancel: object
) -> StreamChunk | None:
    """The next chunk, ``None`` once the request is cancelled (a stop does not wait for a model
    that is slow or hung), ``TimeoutError`` after ``timeout`` s (``None``: no limit),
    ``StopAsyncIteration`` at the end."""
    if not isinstance(cancel, asyncio.Event):
        return await asyncio.wait_for(iterator.__anext__(), timeout)
    if cancel.is_set():
        return None
    nxt = asyncio.ensure_future(iterator.__anext__())
    stop = asyncio.ensure_future(cancel.wait())
    done: set[asyncio.Task[object]] = set()
    try:
        done, _ = await asyncio.wait({nxt, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if nxt in done:
            return nxt.result()
        nxt.cancel()
        with contextlib.suppress(BaseException):
            await nxt
        if stop in done:
            return None
        raise TimeoutError
    finally:
        stop.cancel()
        # the end of the stream raises StopAsyncIteration out of ``nxt``: its traceback holds this
        # frame, whose locals hold ``nxt``, which holds the exception. Dropped here, the run's
        # objects are freed at once instead of waiting for a full garbage collection.
        del nxt, stop, done


async def consume_stream(
    chat: ChatManage,
    bus: EventBus,
    stream: AsyncIterator[StreamChunk],
    answer_dec: _StreamDecoder,
    thinking_dec: _StreamDecoder,
    tracer: TracerService | None = None,
    span: object = None,
    *,
    in_process: bool = False,
    first_chunk_s: float | None = None,
) -> None:
    """Read the stream to its end (see the module docstring); ``in_process``: the model runs in
    this process, so no time limit applies to its chunks; ``first_chunk_s``: the limit on
    connecting plus the first chunk (``models.chat.timeout_s``), else the idle limit."""
    sid = short_id()
    thinking_id, answer_id = f"{sid}-thinking", f"{sid}-answer"
    thinking_open = False
    answer_completed = False
    stream_error = ""
    answer_text = ""

    def close_thinking() -> None:
        nonlocal thinking_open
        if thinking_open:
            bus.emit(BusEventType.THOUGHT, {"content": "", "done": True}, event_id=thinking_id)
            thinking_open = False

    def flush_decoders() -> None:
        nonlocal answer_text
        t = thinking_dec.flush()
        if t:
            bus.emit(BusEventType.THOUGHT, {"content": t, "done": False}, event_id=thinking_id)
        a = answer_dec.flush()
        if a:
            answer_text += a
            bus.emit(BusEventType.FINAL_ANSWER, {"content": a, "done": False}, event_id=answer_id)

    idle_s = chat.request.params.chat_stream_idle_timeout_s
    idle = None if in_process else idle_s
    deadline_s = chat.request.params.model_failure_deadline_s
    failed_at: float | None = None  # when the first error chunk came
    first = not in_process and first_chunk_s is not None
    iterator = stream.__aiter__()
    try:
        while True:
            wait = first_chunk_s if first else idle
            if failed_at is not None and idle is not None:  # a failing stream gets model_failure_deadline_s to recover
                wait = min(idle, max(0.0, deadline_s - (time.monotonic() - failed_at)))
            try:
                chunk = await _next_chunk(iterator, wait, chat.context.cancel_event)
            except StopAsyncIteration:
                break
            except TimeoutError:
                if failed_at is not None:
                    break  # the failure stands: answer with the fallback
                if first:
                    raise ModelTimeout(
                        "chat_completion_stream", "models.chat.timeout_s", wait or 0.0, "no first token"
                    ) from None
                raise ModelTimeout(
                    "chat_completion_stream", "chat_stream_idle_timeout_s", idle_s, "no answer chunk"
                ) from None
            first = False
            if chunk is None or chat.context.cancelled():
                break
            if chunk.response_type == "error":
                stream_error = chunk.content
                failed_at = failed_at if failed_at is not None else time.monotonic()
                bus.emit(
                    BusEventType.ERROR,
                    {"error": chunk.content, "stage": "chat_completion_stream"},
                    event_id=f"{short_id()}-error",
                )
            elif chunk.response_type == "thinking":
                content = thinking_dec.feed(chunk.content)
                if chunk.done:
                    content += thinking_dec.flush()
                if content:
                    thinking_open = True
                    bus.emit(BusEventType.THOUGHT, {"content": content, "done": False}, event_id=thinking_id)
                if chunk.done:
                    close_thinking()
            elif chunk.response_type == "answer":
                failed_at = None  # the stream recovered
                if answer_completed:
                    continue
                content = answer_dec.feed(chunk.content)
                data: dict[str, object] = {}
                if chunk.done:
                    content += answer_dec.flush()
                    answer_completed = True
                    if chunk.finish_reason in TRUNCATION_REASONS:
                        data["truncated"] = True
                        if not (answer_text + content).strip():
                            content = TRUNCATED_EMPTY_MESSAGE
                    if chunk.finish_reason:
                        data["finish_reason"] = chunk.finish_reason
                    if chunk.usage:
                        data["usage"] = dict(chunk.usage)
                        chat.state.diagnostics["usage"] = dict(chunk.usage)
                answer_text += content
                close_thinking()
                bus.emit(
                    BusEventType.FINAL_ANSWER, {"content": content, "done": chunk.done, **data}, event_id=answer_id
                )
    except Exception as exc:  # a transport failure mid-stream: report it like an error chunk
        log.warning("answer stream failed: %s", exc)
        stream_error = str(exc) or type(exc).__name__
        bus.emit(
            BusEventType.ERROR,
            {"error": stream_error, "stage": "chat_completion_stream"},
            event_id=f"{short_id()}-error",
        )
    flush_decoders()
    close_thinking()
    chat.state.chat_response = answer_text
    if not answer_completed and not chat.context.cancelled():
        emit_model_failure_fallback(
            chat, stream_error or "the answer stream ended without finishing (connection cut?)", answer_text
        )
    if tracer is not None:
        usage = chat.state.diagnostics.get("usage") or {}
        tracer.end_span(
            span,
            {
                "answer.completed": answer_completed,
                "answer.chars": len(answer_text),
                "usage.prompt_tokens": usage.get("prompt_tokens"),
                "usage.completion_tokens": usage.get("completion_tokens"),
            },
            error=stream_error,
        )
