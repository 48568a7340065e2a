"""MEMORY_RECALL: the caller's long-term notes relevant to the question (spec §4.2, seed).

Skipped without a memory service. ``memory.recall(user_id, query)`` returns ``{prompt, items}``
(an object with those attributes or a mapping) and makes no model call. A non-empty prompt becomes
``memory_prompt`` (appended to the system prompt by the answer stage), the items become
``used_memories`` and a ``memory_recalled`` event carries them when there are any. The stage never
fails: a memory error is logged and the question goes on without memories.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.stream.bus import BusEventType
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import MemoryRecallDiagnostics
from rag_lab.types.events import EventType

log = logging.getLogger(__name__)


def _part(result: object, name: str) -> Any:
    if isinstance(result, dict):
        return result.get(name)
    return getattr(result, name, None)


class PluginMemoryRecall(StagePlugin):
    events = (EventType.MEMORY_RECALL,)
    contract = StageContract(
        reads=("context.event_bus", "request.query", "request.user_id"),
        writes=("state.diagnostics.memory_recall", "state.memory_prompt", "state.used_memories"),
        params=(),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        memory = self.services.memory
        if memory is None:
            return await next()
        req, state = chat.request, chat.state
        try:
            result = await asyncio.to_thread(memory.recall, req.user_id, req.query)
            prompt = _part(result, "prompt") or ""
            items = list(_part(result, "items") or [])
            if not isinstance(prompt, str):
                raise TypeError(f"recall returned a {type(prompt).__name__} prompt, expected str")
        except Exception as exc:
            log.warning("memory_recall failed, continuing without memories: %s", exc)
            state.diagnostics["memory_recall"] = MemoryRecallDiagnostics(error=str(exc))
            return await next()
        state.diagnostics["memory_recall"] = MemoryRecallDiagnostics(items=len(items), prompt_chars=len(prompt))
        if prompt:
            state.memory_prompt = prompt
            state.used_memories = items
            bus = chat.context.event_bus
            if bus is not None and items:
                try:
                    bus.emit(BusEventType.MEMORY_RECALLED, {"memories": items})
                except Exception as exc:
                    log.warning("memory_recalled event not delivered: %s", exc)
        return await next()
