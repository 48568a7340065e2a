"""CHAT_COMPLETION (non-streaming): one call, decoded citations into ``chat_response`` (§4.12)."""

from __future__ import annotations

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrGetChatModel, ErrModelCall, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.common import (
    CHAT_COMPLETION_READS,
    chat_options,
    prepare_messages_with_history,
    prepare_messages_with_model_context,
)
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType


class PluginChatCompletion(StagePlugin):
    events = (EventType.CHAT_COMPLETION,)
    contract = StageContract(
        reads=CHAT_COMPLETION_READS,
        writes=("state.chat_response",),
        params=("web_snippet_max_runes",),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        from rag_lab.modelcontext import decode_output_text

        try:
            model = self.services.get_chat_model(chat.request.chat_model_id)
        except Exception as exc:
            return ErrGetChatModel.with_error(exc)
        messages, registry = prepare_messages_with_model_context(chat, prepare_messages_with_history(chat))
        try:
            resp = await model.chat(messages, chat_options(chat))
        except Exception as exc:
            return ErrModelCall.with_error(exc)
        chat.state.chat_response = decode_output_text(resp.content, registry)
        return await next()
