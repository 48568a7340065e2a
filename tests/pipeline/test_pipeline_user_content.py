"""INTO_CHAT_MESSAGE sends the user's own question on both paths (upstream: the rewrite on the
non-retrieval path, the original on the RAG path, spec B.10; docs/differences.md)."""

from __future__ import annotations

import asyncio

from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugins.into_chat_message import PluginIntoChatMessage
from rag_lab.types import ChatManage, PipelineRequest, SearchResult


async def _nothing() -> None:
    return None


def _user_content(intent: str) -> str:
    chat = ChatManage(request=PipelineRequest(query="and the second one?"))
    chat.request.summary_config.context_template = "Q: {{query}}\n{{contexts}}"
    chat.state.intent = intent
    chat.state.rewrite_query = "When was the second Brightwater lighthouse built?"
    chat.state.merge_result = [SearchResult(id="c1", content="Built in 1902.", knowledge_title="Brightwater")]
    assert asyncio.run(PluginIntoChatMessage(Services()).on_event("into_chat_message", chat, _nothing)) is None
    return chat.state.user_content


def test_both_paths_send_the_original_question() -> None:
    rag, chitchat = _user_content(""), _user_content("chitchat")
    assert rag.startswith("Q: and the second one?\n") and "Built in 1902." in rag
    assert chitchat == "Q: and the second one?\n"
