"""The answer-stream consumer (§4.12.3): it notices a stop at once (not at the next model chunk or
the idle timeout), a done chunk is not doubled, and an idle stream times out."""

from __future__ import annotations

import asyncio
from typing import Any

from rag_lab.modelcontext.registry import Registry
from rag_lab.modelcontext.stream import StreamDecoder
from rag_lab.models.base import StreamChunk
from rag_lab.pipeline.plugins.chat_completion_stream import consume_stream
from rag_lab.stream.bus import BusEventType, EventBus
from rag_lab.types import ChatManage, PipelineParams, PipelineRequest


def _chat(cancel: Any = None, idle: float = 30.0) -> ChatManage:
    chat = ChatManage(request=PipelineRequest(params=PipelineParams(chat_stream_idle_timeout_s=idle)))
    chat.context.cancel_event = cancel
    return chat


async def _slow_stream(first: str, gate: asyncio.Event | None = None) -> Any:
    yield StreamChunk("answer", first)
    await asyncio.sleep(30)  # a model that stalls after its first chunk
    yield StreamChunk("answer", " never", done=True)


def _run(chat: ChatManage, stream: Any) -> list[dict[str, Any]]:
    bus = EventBus()
    answers: list[dict[str, Any]] = []
    bus.on(BusEventType.FINAL_ANSWER, lambda ev: answers.append(dict(ev.data)))
    reg = Registry()
    asyncio.run(consume_stream(chat, bus, stream, StreamDecoder(reg), StreamDecoder(reg)))
    return answers


def test_an_asyncio_stop_is_noticed_at_once() -> None:
    async def main() -> list[dict[str, Any]]:
        cancel = asyncio.Event()
        chat = _chat(cancel)
        bus = EventBus()
        answers: list[dict[str, Any]] = []
        bus.on(BusEventType.FINAL_ANSWER, lambda ev: answers.append(dict(ev.data)))
        reg = Registry()
        asyncio.get_running_loop().call_later(0.2, cancel.set)
        await consume_stream(chat, bus, _slow_stream("Partial"), StreamDecoder(reg), StreamDecoder(reg))
        assert chat.state.chat_response == "Partial"
        return answers

    # noticed at once: a stream that waited for the stalled model would end with " never" (done)
    answers = asyncio.run(main())
    assert [a["content"] for a in answers] == ["Partial"] and not any(a.get("done") for a in answers)


def test_a_done_chunk_is_not_doubled_and_an_idle_stream_still_times_out() -> None:
    async def done() -> Any:
        yield StreamChunk("answer", "Yes.", done=True, finish_reason="stop")

    answers = _run(_chat(), done())
    assert [(a["content"], a["done"]) for a in answers] == [("Yes.", True)]

    errors: list[dict[str, Any]] = []

    async def stalled() -> Any:
        await asyncio.sleep(5)
        yield StreamChunk("answer", "late")

    bus = EventBus()
    bus.on(BusEventType.ERROR, lambda ev: errors.append(dict(ev.data)))
    reg = Registry()
    chat = _chat(cancel=asyncio.Event(), idle=0.2)

    async def main() -> None:
        chat.context.cancel_event = asyncio.Event()
        await consume_stream(chat, bus, stalled(), StreamDecoder(reg), StreamDecoder(reg))

    asyncio.run(main())
    assert (
        errors
        and "chat_completion_stream: no answer chunk within chat_stream_idle_timeout_s=0.2 s" in errors[0]["error"]
    )


def test_the_end_of_a_stream_leaves_no_reference_cycle() -> None:
    """The StopAsyncIteration that ends a stream is not kept in a cycle with the task that raised
    it (before: exception → traceback → the waiting frame → the task → the exception), so a
    run's objects are freed at once, not by a full garbage collection."""
    import gc

    from rag_lab.pipeline.plugins.chat_completion_stream import _next_chunk

    async def one_chunk() -> Any:
        yield StreamChunk("answer", "a", done=True)

    async def main() -> None:
        cancel = asyncio.Event()
        it = one_chunk().__aiter__()
        assert (await _next_chunk(it, 5.0, cancel)).content == "a"
        try:
            await _next_chunk(it, 5.0, cancel)
        except StopAsyncIteration:
            pass
        else:
            raise AssertionError("the stream did not end")

    loop = asyncio.new_event_loop()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        loop.run_until_complete(main())
        gc.collect()
        in_cycles = [o for o in gc.garbage if isinstance(o, StopAsyncIteration)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        loop.close()
    assert in_cycles == []
