"""OpenAI-compatible chat model (``openai.AsyncOpenAI``): plain and streamed completions,
reasoning content, finish reasons and usage.

Works with OpenAI, vLLM, llama.cpp ``llama-server``, Ollama, DashScope, DeepSeek and others.
Reasoning text is read from the non-standard ``reasoning_content`` field (DeepSeek, Qwen, vLLM)
or ``reasoning`` (OpenRouter, newer vLLM).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.models.base import ChatMessage, ChatOptions, ChatResponse, ModelError, StreamChunk
from rag_lab.models.embedding import short_text

if TYPE_CHECKING:
    import openai

_ROLES = ("system", "user", "assistant", "tool")
_OPTION_FIELDS = (
    "temperature",
    "top_p",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "response_format",
    "timeout",  # per request: the calling stage's timeout replaces the client's
)


def options_to_kwargs(options: ChatOptions | None) -> dict[str, Any]:
    """Request kwargs for the non-``None`` options; ``thinking`` goes to
    ``extra_body={"enable_thinking": bool}`` (the Qwen / DashScope / vLLM switch)."""
    if options is None:
        return {}
    kwargs: dict[str, object] = {}
    for name in _OPTION_FIELDS:
        value = getattr(options, name)
        if value is not None:
            kwargs[name] = value
    if options.thinking is not None:
        kwargs["extra_body"] = {"enable_thinking": bool(options.thinking)}
    return kwargs


def messages_to_openai(
    messages: Sequence[ChatMessage], supports_vision: bool, model: str = ""
) -> list[dict[str, object]]:
    """OpenAI message dicts. A user message with images becomes multimodal content parts
    (text first, then one ``image_url`` part per image: an http(s) URL or a ``data:`` URI).
    Images on a model without vision, or on a non-user message, raise ``ModelError``."""
    out: list[dict[str, object]] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, ChatMessage):
            raise ModelError(f"messages[{i}] is {type(msg).__name__}, expected ChatMessage")
        if msg.role not in _ROLES:
            raise ModelError(f"messages[{i}].role is {msg.role!r}, expected one of {', '.join(_ROLES)}")
        if msg.images:
            if msg.role != "user":
                raise ModelError(f"messages[{i}] ({msg.role}) carries images; only user messages may")
            if not supports_vision:
                raise ModelError(
                    f"messages[{i}] carries {len(msg.images)} image(s) but model {model!r} has supports_vision=False"
                )
            parts: list[dict[str, object]] = []
            if msg.content:
                parts.append({"type": "text", "text": msg.content})
            for j, image in enumerate(msg.images):
                if not isinstance(image, str) or not image:
                    raise ModelError(f"messages[{i}].images[{j}] must be a non-empty URL or data URI")
                parts.append({"type": "image_url", "image_url": {"url": image}})
            out.append({"role": "user", "content": parts})
        else:
            out.append({"role": msg.role, "content": msg.content})
    return out


def _extra(obj: object, name: str) -> object:
    """A field the ``openai`` models may not declare (kept in ``model_extra``)."""
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def reasoning_of(obj: object) -> str:
    """The reasoning text of a message or delta (``reasoning_content`` or ``reasoning``)."""
    for name in ("reasoning_content", "reasoning"):
        value = _extra(obj, name)
        if isinstance(value, str) and value:
            return value
    return ""


def usage_dict(usage: object) -> dict[str, object]:
    """``usage`` as a plain dict without ``None`` members."""
    if usage is None:
        return {}
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump(exclude_none=True)
    return {k: v for k, v in dict(usage).items() if v is not None} if isinstance(usage, dict) else {}


class OpenAIChatModel:
    """Chat through any OpenAI-compatible ``/chat/completions`` endpoint.

    ``chat()`` returns a ``ChatResponse``. ``chat_stream()`` yields ``thinking`` chunks for
    reasoning deltas, ``answer`` chunks for content deltas, and finally an ``answer`` chunk with
    ``done=True``, the finish reason and the usage (requested with
    ``stream_options.include_usage``). Failures before the first chunk raise ``ModelError``;
    a stream that breaks afterwards (transport error, an error event, or an end without any
    finish reason) yields one ``error`` chunk and stops without a done chunk.

    A fresh ``AsyncOpenAI`` client is opened per call, so one object can serve several event
    loops (Jupyter, ``asyncio.run`` per call). ``max_retries`` is the client's retry count for
    429/5xx/connection errors before a reply starts.

    ``timeout_s`` (``models.chat.timeout_s``, default :data:`DEFAULT_TIMEOUT_S`) bounds connecting
    plus the first token: the answer stream's first chunk, and a non-streamed reply (query
    understanding), whose first token comes with the whole reply, together with the stage's own
    limit (the smaller applies). With the defaults a dead or hung endpoint costs a question at
    most twice that (query understanding, then the answer stream), each failure naming the stage,
    the setting and the seconds. ``timeout`` is the HTTP client's limit on a whole request.

    ``openai`` and ``httpx`` are imported when the object is built: a first import takes seconds
    (over a minute on a loaded machine), and inside a call it counted against the calling stage's
    timeout, so the first request timed out before it was sent.
    """

    #: calls an endpoint: the stages' time limits apply
    in_process: bool = False
    #: default of ``timeout_s`` (``models.chat.timeout_s``): connect + first token, in seconds
    DEFAULT_TIMEOUT_S = 15.0

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        supports_vision: bool = False,
        timeout: float = 120.0,
        *,
        max_retries: int = 2,
        extra_body: dict[str, object] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if not model:
            raise ValueError("OpenAIChatModel: model must be non-empty")
        if not base_url:
            raise ValueError("OpenAIChatModel: base_url must be non-empty")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.api_key = api_key
        self.supports_vision = supports_vision
        self.follows_instructions = True
        self.timeout = timeout
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"OpenAIChatModel: timeout_s must be a number of seconds > 0, got {timeout_s!r}")
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.extra_body = dict(extra_body or {})
        self.model_id = f"{model}|{self.base_url}"
        import httpx
        import openai

        self._openai = openai
        self._httpx = httpx

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    def honours_schema_bounds(self) -> bool:
        """Whether the endpoint constrains decoding to a JSON schema's ``maxLength`` / ``maxItems``:
        true for a llama-server (it answers ``/props``; probed once per base URL, a blocking call:
        :func:`~rag_lab.models.endpoint_props.server_props`). OpenAI's strict schemas refuse ``maxLength``, so elsewhere the
        schema is sent without bounds."""
        from rag_lab.models.endpoint_props import server_props

        return server_props(self.base_url) is not None

    def _client(self) -> openai.AsyncOpenAI:
        return self._openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key or "not-needed",
            timeout=self.timeout,
            max_retries=self.max_retries,
        )

    def _kwargs(self, messages: Sequence[ChatMessage], options: ChatOptions | None) -> dict[str, Any]:
        kwargs = options_to_kwargs(options)
        if self.extra_body:
            kwargs["extra_body"] = {**self.extra_body, **kwargs.get("extra_body", {})}
        kwargs["model"] = self.model
        kwargs["messages"] = messages_to_openai(messages, self.supports_vision, self.model)
        return kwargs

    def _call_error(self, exc: BaseException, timeout: float | None = None) -> ModelError:
        openai = self._openai
        if isinstance(exc, openai.APIStatusError):
            return ModelError(
                f"chat request to {self.url} failed: HTTP {exc.status_code}: {short_text(exc.response.text)}"
            )
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"chat request to {self.url} timed out after {timeout or self.timeout}s")
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(f"chat request to {self.url} failed: cannot connect ({exc})")
        return ModelError(f"chat request to {self.url} failed: {type(exc).__name__}: {exc}")

    async def chat(self, messages: Sequence[ChatMessage], options: ChatOptions | None = None) -> ChatResponse:
        openai = self._openai
        kwargs = self._kwargs(messages, options)
        async with self._client() as client:
            try:
                resp = await client.chat.completions.create(**kwargs)
            except openai.OpenAIError as exc:
                raise self._call_error(exc, kwargs.get("timeout")) from exc
            except ValueError as exc:  # a body announced as JSON that does not parse
                raise ModelError(f"chat reply from {self.url} is not valid JSON: {exc}") from exc
        if isinstance(resp, str):
            raise ModelError(f"chat reply from {self.url} is not JSON: {short_text(resp, 120)!r}")
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise ModelError(f"chat reply from {self.url} has no 'choices'")
        message = getattr(choices[0], "message", None)
        if message is None:
            raise ModelError(f"chat reply from {self.url}: choices[0] has no 'message'")
        content = getattr(message, "content", None)
        return ChatResponse(
            content=content if isinstance(content, str) else "",
            reasoning_content=reasoning_of(message),
            finish_reason=getattr(choices[0], "finish_reason", None) or "",
            usage=usage_dict(getattr(resp, "usage", None)),
        )

    async def chat_stream(
        self, messages: Sequence[ChatMessage], options: ChatOptions | None = None
    ) -> AsyncIterator[StreamChunk]:
        openai, httpx = self._openai, self._httpx
        kwargs = self._kwargs(messages, options)
        async with self._client() as client:
            try:
                stream = await client.chat.completions.create(
                    **kwargs, stream=True, stream_options={"include_usage": True}
                )
            except openai.OpenAIError as exc:
                raise self._call_error(exc, kwargs.get("timeout")) from exc
            finish_reason = ""
            usage: dict[str, object] = {}
            try:
                async for chunk in stream:
                    if getattr(chunk, "usage", None) is not None:
                        usage = usage_dict(chunk.usage)
                    for choice in getattr(chunk, "choices", None) or []:
                        if getattr(choice, "index", 0) != 0:
                            continue
                        delta = getattr(choice, "delta", None)
                        if delta is not None:
                            reasoning = reasoning_of(delta)
                            if reasoning:
                                yield StreamChunk(response_type="thinking", content=reasoning)
                            content = getattr(delta, "content", None)
                            if isinstance(content, str) and content:
                                yield StreamChunk(response_type="answer", content=content)
                        if getattr(choice, "finish_reason", None):
                            finish_reason = choice.finish_reason
            except (openai.OpenAIError, httpx.HTTPError, json.JSONDecodeError) as exc:
                yield StreamChunk(
                    response_type="error",
                    content=f"chat stream from {self.url} broke: {type(exc).__name__}: {exc}",
                )
                return
            finally:
                await stream.close()
            if not finish_reason:
                yield StreamChunk(
                    response_type="error",
                    content=f"chat stream from {self.url} ended without a finish reason (connection cut?)",
                )
                return
            yield StreamChunk(response_type="answer", content="", done=True, finish_reason=finish_reason, usage=usage)
