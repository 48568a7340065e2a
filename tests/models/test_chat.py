"""OpenAIChatModel against the loopback fake: plain and streamed replies, reasoning, faults."""

from __future__ import annotations

from typing import Any

import pytest

from rag_lab.models.base import ChatMessage, ChatModel, ChatOptions, ModelError, StreamChunk
from rag_lab.models.chat import OpenAIChatModel, messages_to_openai, options_to_kwargs

from .fake_openai import FakeOpenAIServer, Reply

MESSAGES = [ChatMessage("system", "You are terse."), ChatMessage("user", "Say hello.")]
USAGE = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}


def model(srv: FakeOpenAIServer, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel("qwen-test", srv.base_url, api_key="sk-x", max_retries=0, **kw)


async def collect(m: OpenAIChatModel, options: ChatOptions | None = None, messages=MESSAGES) -> list[StreamChunk]:
    return [c async for c in m.chat_stream(messages, options or ChatOptions())]


def _sse_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def test_stream_reasoning_content_and_usage(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(
        "/v1/chat/completions",
        Reply.chat(["Hello", ", world", "!"], reasoning=["The user ", "wants a greeting."], usage=USAGE),
    )
    m = model(fake_openai)
    assert isinstance(m, ChatModel) and m.model_id == f"qwen-test|{fake_openai.base_url}"
    chunks = await collect(m, ChatOptions(temperature=0.2, max_tokens=64))
    assert [(c.response_type, c.content, c.done) for c in chunks] == [
        ("thinking", "The user ", False),
        ("thinking", "wants a greeting.", False),
        ("answer", "Hello", False),
        ("answer", ", world", False),
        ("answer", "!", False),
        ("answer", "", True),
    ]
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage == USAGE
    (req,) = fake_openai.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-x"
    assert req.json["stream"] is True
    assert req.json["stream_options"] == {"include_usage": True}
    assert req.json["model"] == "qwen-test"
    assert req.json["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    assert req.json["temperature"] == 0.2 and req.json["max_tokens"] == 64
    for absent in ("top_p", "seed", "enable_thinking", "presence_penalty", "max_completion_tokens"):
        assert absent not in req.json


async def test_stream_finish_reason_length(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/chat/completions", Reply.chat(["The answer is"], finish_reason="length"))
    chunks = await collect(model(fake_openai))
    assert [c.content for c in chunks] == ["The answer is", ""]
    assert chunks[-1].done and chunks[-1].finish_reason == "length"
    assert chunks[-1].usage == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


async def test_stream_disconnect_midway_yields_error_chunk(fake_openai: FakeOpenAIServer) -> None:
    # events: role chunk, "one ", "two ", <cut> (never "three", never the finish chunk)
    fake_openai.script("/v1/chat/completions", Reply.chat(["one ", "two ", "three"], drop_after=3))
    chunks = await collect(model(fake_openai))
    assert [(c.response_type, c.content) for c in chunks[:2]] == [("answer", "one "), ("answer", "two ")]
    assert len(chunks) == 3
    assert chunks[2].response_type == "error"
    assert fake_openai.base_url + "/chat/completions" in chunks[2].content
    assert "broke" in chunks[2].content
    assert not any(c.done for c in chunks)


async def test_stream_without_finish_reason_is_an_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/chat/completions", Reply.sse([_sse_chunk({"content": "partial"}), "[DONE]"]))
    chunks = await collect(model(fake_openai))
    assert [(c.response_type, c.done) for c in chunks] == [("answer", False), ("error", False)]
    assert "ended without a finish reason" in chunks[1].content


async def test_stream_error_event(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(
        "/v1/chat/completions",
        Reply.sse([_sse_chunk({"content": "a"}), {"error": {"message": "upstream overloaded"}}, "[DONE]"]),
    )
    chunks = await collect(model(fake_openai))
    assert chunks[0].content == "a"
    assert chunks[1].response_type == "error" and "upstream overloaded" in chunks[1].content
    assert len(chunks) == 2


async def test_stream_reads_reasoning_alias(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(
        "/v1/chat/completions",
        Reply.sse([_sse_chunk({"reasoning": "hmm"}), _sse_chunk({"content": "ok"}), _sse_chunk({}, "stop"), "[DONE]"]),
    )
    chunks = await collect(model(fake_openai))
    assert [(c.response_type, c.content, c.done, c.finish_reason) for c in chunks] == [
        ("thinking", "hmm", False, ""),
        ("answer", "ok", False, ""),
        ("answer", "", True, "stop"),
    ]
    assert chunks[-1].usage == {}


async def test_stream_http_500_raises_before_first_chunk(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/chat/completions", Reply.error(500, "kaput"))
    gen = model(fake_openai).chat_stream(MESSAGES, ChatOptions())
    with pytest.raises(ModelError) as err:
        await gen.__anext__()
    msg = str(err.value)
    assert fake_openai.base_url + "/chat/completions" in msg and "HTTP 500" in msg and "kaput" in msg


async def test_stream_timeout_before_first_chunk(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/chat/completions", Reply.chat("late", delay=5))
    with pytest.raises(ModelError, match="timed out after 0.3s"):
        await collect(model(fake_openai, timeout=0.3))


async def test_chat_non_streaming(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(
        "/v1/chat/completions",
        Reply.chat("Paris.", reasoning="Capital of France.", usage=USAGE),
        Reply.chat("Par", finish_reason="length"),
    )
    m = model(fake_openai)
    resp = await m.chat(MESSAGES, ChatOptions(seed=7, thinking=False))
    assert (resp.content, resp.reasoning_content, resp.finish_reason) == ("Paris.", "Capital of France.", "stop")
    assert resp.usage == USAGE
    body = fake_openai.requests[0].json
    assert "stream" not in body
    assert body["seed"] == 7 and body["enable_thinking"] is False
    resp2 = await m.chat(MESSAGES, ChatOptions(thinking=True))
    assert (resp2.content, resp2.reasoning_content, resp2.finish_reason) == ("Par", "", "length")
    assert fake_openai.requests[1].json["enable_thinking"] is True


async def test_chat_default_echo_and_500(fake_openai: FakeOpenAIServer) -> None:
    m = model(fake_openai)
    assert (await m.chat(MESSAGES, ChatOptions())).content == "echo: Say hello."
    fake_openai.script("/v1/chat/completions", Reply.error(503, "down"))
    with pytest.raises(ModelError, match="HTTP 503: .*down"):
        await m.chat(MESSAGES, ChatOptions())


async def test_chat_malformed_reply(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/chat/completions", Reply.json({"id": "x", "choices": []}))
    with pytest.raises(ModelError, match="has no 'choices'"):
        await model(fake_openai).chat(MESSAGES, ChatOptions())


async def test_chat_non_json_reply(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(
        "/v1/chat/completions", Reply.raw("<html>gateway</html>", content_type="text/html"), Reply.raw("{oops")
    )
    m = model(fake_openai)
    with pytest.raises(ModelError, match="chat reply from .*/v1/chat/completions is not JSON: '<html>gateway</html>'"):
        await m.chat(MESSAGES, ChatOptions())
    with pytest.raises(ModelError, match="is not valid JSON"):
        await m.chat(MESSAGES, ChatOptions())


async def test_stream_malformed_event_yields_error_chunk(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/chat/completions", Reply.sse([_sse_chunk({"content": "a"}), "{not json", "[DONE]"]))
    chunks = await collect(model(fake_openai))
    assert [(c.response_type, c.content) for c in chunks[:1]] == [("answer", "a")]
    assert len(chunks) == 2 and chunks[1].response_type == "error" and "JSONDecodeError" in chunks[1].content


async def test_vision_messages(fake_openai: FakeOpenAIServer) -> None:
    msgs = [
        ChatMessage("user", "What is in the picture?", images=["data:image/png;base64,AAAA", "https://x.test/a.jpg"])
    ]
    m = model(fake_openai, supports_vision=True)
    assert (await m.chat(msgs, ChatOptions())).content == "echo: What is in the picture?"
    assert fake_openai.requests[0].json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg"}},
            ],
        }
    ]
    with pytest.raises(
        ModelError, match=r"messages\[0\] carries 2 image\(s\) but model 'qwen-test' has supports_vision=False"
    ):
        await model(fake_openai).chat(msgs, ChatOptions())
    assert len(fake_openai.requests) == 1  # refused before any request


def test_options_to_kwargs() -> None:
    assert options_to_kwargs(ChatOptions()) == {}
    assert options_to_kwargs(None) == {}
    opts = ChatOptions(
        temperature=0.0,
        top_p=0.9,
        seed=1,
        max_tokens=5,
        max_completion_tokens=6,
        frequency_penalty=0.1,
        presence_penalty=-0.2,
        thinking=False,
    )
    assert options_to_kwargs(opts) == {
        "temperature": 0.0,
        "top_p": 0.9,
        "seed": 1,
        "max_tokens": 5,
        "max_completion_tokens": 6,
        "frequency_penalty": 0.1,
        "presence_penalty": -0.2,
        "extra_body": {"enable_thinking": False},
    }


def test_messages_validation() -> None:
    with pytest.raises(ModelError, match=r"messages\[1\]\.role is 'robot'"):
        messages_to_openai([ChatMessage("user", "a"), ChatMessage("robot", "b")], False)
    with pytest.raises(ModelError, match=r"messages\[0\] \(assistant\) carries images"):
        messages_to_openai([ChatMessage("assistant", "a", images=["u"])], True)
    assert messages_to_openai([ChatMessage("assistant", "x", reasoning_content="r")], False) == [
        {"role": "assistant", "content": "x"}
    ]
