"""The ledger of one run: wall time per stage, model calls per kind (chat, embedding, rerank),
tokens in/out and cost from a price table.

Models are wrapped once (``wrap_chat_model`` / ``wrap_embedder`` / ``wrap_reranker``); a wrapper
records into the ledger of the run in progress (a context variable, so concurrent runs and the
background answer stream each land in their own ledger) and records nothing outside a run
(ingestion). Token counts come from the provider's ``usage`` when it reports one, otherwise from
``estimate_tokens`` and are flagged ``estimated``.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rag_lab.models.extractive import estimate_tokens

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from rag_lab.models.base import (
        ChatMessage,
        ChatModel,
        ChatOptions,
        ChatResponse,
        Embedder,
        Reranker,
        RerankScore,
        StreamChunk,
    )

_LEDGER: contextvars.ContextVar[Ledger | None] = contextvars.ContextVar("rag_lab_ledger", default=None)
_STAGE: contextvars.ContextVar[str] = contextvars.ContextVar("rag_lab_stage", default="")


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input_per_1m: float = 0.0
    output_per_1m: float = 0.0


class PriceTable:
    """``{model: {input_per_1m, output_per_1m}}``; a model id ``name|base_url`` also matches ``name``."""

    def __init__(self, table: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.prices: dict[str, Price] = {}
        for model, p in (table or {}).items():
            if not isinstance(p, Mapping):
                raise ValueError(f"prices.{model}: expected a mapping with input_per_1m / output_per_1m, got {p!r}")
            unknown = set(p) - {"input_per_1m", "output_per_1m"}
            if unknown:
                raise ValueError(f"prices.{model}: unknown key(s) {', '.join(sorted(unknown))}")
            self.prices[str(model)] = Price(float(p.get("input_per_1m", 0.0)), float(p.get("output_per_1m", 0.0)))

    def price(self, model_id: str) -> Price:
        return self.prices.get(model_id) or self.prices.get(model_id.split("|", 1)[0]) or Price()

    def cost(self, model_id: str, tokens_in: int, tokens_out: int) -> float:
        p = self.price(model_id)
        return (tokens_in * p.input_per_1m + tokens_out * p.output_per_1m) / 1e6


@dataclass(slots=True)
class ModelCall:
    kind: str  # "chat" | "embedding" | "rerank"
    model_id: str
    stage: str
    items: int
    tokens_in: int
    tokens_out: int
    ms: float
    estimated: bool
    cost: float = 0.0
    error: str = ""


@dataclass
class Ledger:
    prices: PriceTable = field(default_factory=PriceTable)
    calls: list[ModelCall] = field(default_factory=list)
    stage_ms: dict[str, float] = field(default_factory=dict)

    def record(
        self,
        kind: str,
        model_id: str,
        items: int,
        tokens_in: int,
        tokens_out: int,
        ms: float,
        estimated: bool,
        error: str = "",
    ) -> None:
        self.calls.append(
            ModelCall(
                kind,
                model_id,
                _STAGE.get(),
                items,
                tokens_in,
                tokens_out,
                ms,
                estimated,
                self.prices.cost(model_id, tokens_in, tokens_out),
                error,
            )
        )

    # -- summaries --------------------------------------------------------------------------
    def calls_by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.calls:
            out[c.kind] = out.get(c.kind, 0) + 1
        return out

    @property
    def tokens_in(self) -> int:
        return sum(c.tokens_in for c in self.calls)

    @property
    def tokens_out(self) -> int:
        return sum(c.tokens_out for c in self.calls)

    @property
    def cost(self) -> float:
        return sum(c.cost for c in self.calls)

    def summary(self) -> dict[str, object]:
        return {
            "calls": self.calls_by_kind(),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost,
            "stage_ms": dict(self.stage_ms),
        }

    def frame(self) -> pd.DataFrame:
        """One row per model call (pandas)."""
        import pandas as pd

        return pd.DataFrame([asdict(c) for c in self.calls], columns=list(ModelCall.__dataclass_fields__))

    def stage_frame(self) -> pd.DataFrame:
        """Per stage: wall time, calls, tokens and cost (pandas)."""
        import pandas as pd

        rows = []
        for stage, ms in self.stage_ms.items():
            calls = [c for c in self.calls if c.stage == stage]
            rows.append(
                {
                    "stage": stage,
                    "ms": ms,
                    "calls": len(calls),
                    "tokens_in": sum(c.tokens_in for c in calls),
                    "tokens_out": sum(c.tokens_out for c in calls),
                    "cost_usd": sum(c.cost for c in calls),
                }
            )
        return pd.DataFrame(rows, columns=["stage", "ms", "calls", "tokens_in", "tokens_out", "cost_usd"])


class use_ledger:
    """``with use_ledger(ledger):`` — model calls inside record into ``ledger``."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._token: Any = None

    def __enter__(self) -> Ledger:
        self._token = _LEDGER.set(self.ledger)
        return self.ledger

    def __exit__(self, *exc: object) -> None:
        _LEDGER.reset(self._token)


def set_stage(stage: str) -> contextvars.Token[str]:
    return _STAGE.set(stage)


def reset_stage(token: contextvars.Token[str]) -> None:
    _STAGE.reset(token)


def _messages_tokens(messages: Sequence[object]) -> int:
    return sum(estimate_tokens(str(getattr(m, "content", "") or "")) for m in messages)


def _usage_tokens(usage: Mapping[str, object] | None) -> tuple[int, int] | None:
    if not usage:
        return None
    pin, pout = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(pin, int) and isinstance(pout, int):
        return pin, pout
    return None


#: the wrapped model's type
M = TypeVar("M")


class _Proxy(Generic[M]):
    def __init__(self, inner: M) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


def never_connected(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) says the request never reached the
    server: connection refused / reset before sending, DNS failure — not a timeout."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        name = type(cur).__name__
        if name in ("APITimeoutError", "TimeoutError", "ReadTimeout", "WriteTimeout", "PoolTimeout"):
            return False
        if isinstance(cur, (ConnectionRefusedError, ConnectionResetError)) or name in (
            "APIConnectionError",
            "ConnectError",
        ):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def call_error(exc: BaseException) -> str:
    """The ledger's error text of a failed call: cancellations and timeouts named as such."""
    import asyncio

    if isinstance(exc, asyncio.CancelledError):
        return "cancelled (stage timeout or stop)"
    if isinstance(exc, GeneratorExit):
        return "cancelled (the reader stopped the stream)"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


class LedgerChatModel(_Proxy["ChatModel"]):
    """Records every call, also failed, timed-out and cancelled ones (a cancellation is not an
    ``Exception``). A call that never reached the server is charged 0 tokens; one that failed after
    the request was sent is charged its estimated prompt tokens (flagged ``estimated``)."""

    inner: ChatModel

    async def chat(self, messages: Sequence[ChatMessage], options: ChatOptions) -> ChatResponse:
        ledger, t0 = _LEDGER.get(), time.perf_counter()
        try:
            resp = await self.inner.chat(messages, options)
        except BaseException as exc:
            if ledger is not None:
                down = never_connected(exc)
                ledger.record(
                    "chat",
                    self.inner.model_id,
                    1,
                    0 if down else _messages_tokens(messages),
                    0,
                    (time.perf_counter() - t0) * 1000,
                    not down,
                    error=call_error(exc),
                )
            raise
        if ledger is not None:
            used = _usage_tokens(resp.usage)
            tin, tout = used or (_messages_tokens(messages), estimate_tokens(resp.content))
            ledger.record("chat", self.inner.model_id, 1, tin, tout, (time.perf_counter() - t0) * 1000, used is None)
        return resp

    def chat_stream(self, messages: Sequence[ChatMessage], options: ChatOptions) -> AsyncIterator[StreamChunk]:
        inner_stream = self.inner.chat_stream(messages, options)
        ledger = _LEDGER.get()
        if ledger is None:
            return inner_stream
        return self._recorded(inner_stream, messages, ledger)

    async def _recorded(
        self, stream: AsyncIterator[StreamChunk], messages: Sequence[ChatMessage], ledger: Ledger
    ) -> AsyncIterator[StreamChunk]:
        t0, text, usage, error, down = time.perf_counter(), [], None, "", False
        try:
            async for chunk in stream:
                if chunk.response_type == "answer":
                    text.append(chunk.content)
                    if chunk.done and chunk.usage:
                        usage = chunk.usage
                elif chunk.response_type == "error":
                    error = chunk.content
                yield chunk
        except BaseException as exc:
            error = error or call_error(exc)
            down = not text and never_connected(exc)
            raise
        finally:
            used = _usage_tokens(usage)
            if down:
                tin, tout = 0, 0
            else:
                tin, tout = used or (_messages_tokens(messages), estimate_tokens("".join(text)))
            ledger.record(
                "chat",
                self.inner.model_id,
                1,
                tin,
                tout,
                (time.perf_counter() - t0) * 1000,
                used is None and not down,
                error,
            )


class LedgerEmbedder(_Proxy["Embedder"]):
    inner: Embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        ledger, t0 = _LEDGER.get(), time.perf_counter()
        out = self.inner.embed(texts)
        if ledger is not None:
            items = list(texts)
            ledger.record(
                "embedding",
                self.inner.model_key,
                len(items),
                sum(estimate_tokens(t) for t in items),
                0,
                (time.perf_counter() - t0) * 1000,
                True,
            )
        return out


class LedgerReranker(_Proxy["Reranker"]):
    inner: Reranker

    async def rerank(self, query: str, passages: Sequence[str]) -> list[RerankScore]:
        ledger, t0 = _LEDGER.get(), time.perf_counter()
        try:
            return await self.inner.rerank(query, passages)
        finally:
            if ledger is not None:
                tokens = estimate_tokens(query) * len(passages) + sum(estimate_tokens(p) for p in passages)
                ledger.record(
                    "rerank", self.inner.model_id, len(passages), tokens, 0, (time.perf_counter() - t0) * 1000, True
                )
