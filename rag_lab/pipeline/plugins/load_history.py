"""LOAD_HISTORY: the last rounds of the session as (query, answer, references) pairs (§4.1)."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.prompts.templates import IMAGE_CONTENT_LABEL
from rag_lab.types.chat_manage import ChatManage, History
from rag_lab.types.events import EventType

if TYPE_CHECKING:
    from rag_lab.pipeline.container import MessageService

log = logging.getLogger(__name__)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def load_and_process_history(
    messages_store: MessageService, session_id: str, max_rounds: int, fetch_count: int
) -> list[History]:
    """Pair the newest messages by request id, strip thinking, keep the last ``max_rounds``."""
    msgs = messages_store.get_recent_messages(session_id, fetch_count)
    msgs = sorted(msgs, key=lambda m: (m.created_at, 0 if m.role == "user" else 1))
    by_request: dict[str, History] = {}
    order: list[str] = []
    for m in msgs:
        h = by_request.get(m.request_id)
        if h is None:
            h = by_request[m.request_id] = History()
            order.append(m.request_id)
        if m.role == "user":
            q = m.content  # the original content, never the rendered one
            captions = [c for c in m.image_captions if c]
            if captions:
                q += IMAGE_CONTENT_LABEL + "\n".join(captions)
            if m.attachment_prompt:
                q += "\n\n" + m.attachment_prompt
            h.query, h.create_at = q, m.created_at
        else:
            h.answer = _THINK.sub("", m.content)
            h.knowledge_references = [r.copy() for r in m.knowledge_references]
    pairs = [by_request[k] for k in order if by_request[k].query and by_request[k].answer]
    pairs.sort(key=lambda h: h.create_at, reverse=True)
    return list(reversed(pairs[:max_rounds]))


class PluginLoadHistory(StagePlugin):
    events = (EventType.LOAD_HISTORY,)
    contract = StageContract(
        reads=("request.max_rounds", "request.session_id"),
        writes=("state.history",),
        params=("history_fetch_extra",),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req = chat.request
        store = self.services.messages
        if req.max_rounds <= 0 or store is None:
            return await next()
        fetch = req.max_rounds * 2 + req.params.history_fetch_extra
        try:
            chat.state.history = load_and_process_history(store, req.session_id, req.max_rounds, fetch)
        except Exception as exc:
            log.warning("load_history failed, continuing without history: %s", exc)
        return await next()
