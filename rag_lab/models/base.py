"""Model protocols: embeddings, rerank, chat (streaming). Implementations live beside this file.

Besides the protocol members, a model may declare ``in_process: bool`` (see
:mod:`rag_lab.models.timeouts`): ``True`` when it computes in this process (the offline
defaults), ``False`` when it calls an endpoint. The stages' time limits apply to remote models
only; a model without the attribute counts as remote. It is not a protocol member, so a user's
model class without it still satisfies the protocols.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


class ModelError(RuntimeError):
    """A model call or load failed (network, HTTP status, timeout, malformed reply)."""


@runtime_checkable
class Embedder(Protocol):
    #: identity of the embedding space, "name|base_url"; vectors from two keys never mix
    model_key: str

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dimension), rows L2-normalised."""
        ...


@dataclass(slots=True)
class RerankScore:
    index: int
    relevance_score: float


@runtime_checkable
class Reranker(Protocol):
    model_id: str

    async def rerank(self, query: str, passages: Sequence[str]) -> list[RerankScore]:
        """Scores for the passages, normally sorted by relevance descending."""
        ...


@dataclass(slots=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    images: list[str] = field(default_factory=list)
    reasoning_content: str = ""


@dataclass(slots=True)
class ChatOptions:
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    thinking: bool | None = None
    #: OpenAI ``response_format`` (e.g. a JSON schema), passed through when set
    response_format: dict[str, object] | None = None
    #: seconds for this call (the calling stage's timeout), replacing the client's default
    timeout: float | None = None


@dataclass(slots=True)
class StreamChunk:
    """One piece of a streamed reply. ``response_type`` is "answer", "thinking" or "error"."""

    response_type: str
    content: str = ""
    done: bool = False
    finish_reason: str = ""
    usage: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class ChatResponse:
    content: str
    reasoning_content: str = ""
    finish_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ChatModel(Protocol):
    model_id: str
    supports_vision: bool
    #: False for models that cannot follow a prompt (the offline extractive answerer): stages that
    #: need instructions followed (rewrite, SQL, entity extraction) skip them with a diagnostic
    follows_instructions: bool

    async def chat(self, messages: Sequence[ChatMessage], options: ChatOptions) -> ChatResponse: ...

    def chat_stream(self, messages: Sequence[ChatMessage], options: ChatOptions) -> AsyncIterator[StreamChunk]:
        """An async iterator of chunks; the last answer chunk has ``done=True``."""
        ...
