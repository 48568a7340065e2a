"""Plugin protocol, chained EventManager and PluginError (spec §2, seed "Cadre de plugins").

For one event the first registered plugin is the outermost link of the chain: it runs first and
reaches the inner plugins only by awaiting ``next()``. A plugin may work before ``next()``
(most stages), after it (WikiBoost, MemoryAffinity), or not call it at all (stops the chain).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType

NextFn = Callable[[], Awaitable["PluginError | None"]]
_P = TypeVar("_P")


@dataclass(frozen=True, slots=True, eq=False)
class PluginError(Exception):
    """A stage failure. ``err`` is the underlying exception (may be None)."""

    description: str
    error_type: str
    err: BaseException | None = None

    def with_error(self, err: BaseException | None) -> PluginError:
        """A *new* error of the same kind carrying ``err`` (never the shared singleton)."""
        return PluginError(self.description, self.error_type, err)

    def __str__(self) -> str:
        return f"{self.description}: {self.err}" if self.err is not None else self.description


# Predefined kinds (spec §2.2). ErrSearchNothing is recognised by identity: return it as is.
ErrSearchNothing = PluginError("No relevant content found", "search_nothing")
ErrSearch = PluginError("Failed to search knowledge base", "search_failed")
ErrRerank = PluginError("Reranking failed", "rerank_failed")
ErrGetRerankModel = PluginError("Failed to get rerank model", "get_rerank_model_failed")
ErrGetChatModel = PluginError("Failed to get chat model", "get_chat_model_failed")
ErrTemplateParse = PluginError("Failed to parse context template", "template_parse_failed")
ErrTemplateExecute = PluginError("Failed to generate search content", "template_execution_failed")
ErrModelCall = PluginError("Failed to call model", "model_call_failed")
ErrGetHistory = PluginError("Failed to get conversation history", "get_history_failed")


@runtime_checkable
class Plugin(Protocol):
    def activation_events(self) -> list[EventType]: ...

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None: ...


class EventManager:
    """``event → [plugins]`` in registration order; ``trigger`` runs the onion chain."""

    def __init__(self) -> None:
        self._plugins: dict[EventType, list[Plugin]] = {}

    def register(self, plugin: Plugin) -> None:
        for ev in plugin.activation_events():
            self._plugins.setdefault(EventType(ev), []).append(plugin)

    def register_all(self, plugins: Iterable[Plugin]) -> None:
        for p in plugins:
            self.register(p)

    def plugins_for(self, event: EventType) -> list[Plugin]:
        return list(self._plugins.get(EventType(event), []))

    def find(self, plugin_type: type[_P]) -> _P:
        """The first registered plugin of a type (stages that compose others use it)."""
        for plugins in self._plugins.values():
            for p in plugins:
                if isinstance(p, plugin_type):
                    return p
        raise LookupError(f"no plugin of type {plugin_type.__name__} is registered")

    async def trigger(self, event: EventType, chat: ChatManage) -> PluginError | None:
        chain = self._plugins.get(EventType(event), [])
        if not chain:
            return None
        return await self._call(chain, 0, EventType(event), chat)

    async def _call(self, chain: list[Plugin], i: int, event: EventType, chat: ChatManage) -> PluginError | None:
        if i >= len(chain):
            return None

        async def next_() -> PluginError | None:
            return await self._call(chain, i + 1, event, chat)

        return await chain[i].on_event(event, chat, next_)


# ---- concurrency helpers (§2.3) ------------------------------------------------------------
async def run_parallel(tasks: dict[str, Callable[[], Awaitable[object]]]) -> dict[str, BaseException]:
    """Run named tasks concurrently; return ``{name: error}`` for those that failed."""
    names = list(tasks)
    results = await asyncio.gather(*(tasks[n]() for n in names), return_exceptions=True)
    return {n: r for n, r in zip(names, results) if isinstance(r, BaseException)}
