"""Shared by CHAT_COMPLETION and CHAT_COMPLETION_STREAM: model options and message assembly
(spec §4.12.1–§4.12.2) including the model context (aliases, protocol prompt, retrieval XML)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.prompts.templates import render_prompt_placeholders
from rag_lab.types.chat_manage import ChatManage

if TYPE_CHECKING:
    from rag_lab.modelcontext import Registry

_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)")

RETRIEVED_IMAGE_REQUIREMENT = """

## Retrieved Image Output Requirement
Some retrieved passages contain images. Unless the user asked for text only or every image is
clearly unrelated, include at least one relevant image in the answer:
- copy its Markdown `![alt](url)` exactly, URL unchanged, with ASCII parentheses;
- put each image right after the paragraph it supports, spreading images across sections;
- check these rules silently before answering."""

# What message assembly and the model call read: declared by both chat-completion stages.
CHAT_COMPLETION_READS = (
    "request.chat_model_id",
    "request.chat_model_supports_vision",
    "request.citation_enabled",
    "request.faq_priority_enabled",
    "request.language",
    "request.query",
    "request.summary_config",
    "state.history",
    "state.memory_prompt",
    "state.merge_result",
    "state.rendered_contexts",
    "state.system_prompt_override",
    "state.user_content",
)


def chat_options(chat: ChatManage) -> ChatOptions:
    sc = chat.request.summary_config
    return ChatOptions(
        temperature=sc.temperature,
        top_p=sc.top_p,
        seed=sc.seed,
        max_tokens=sc.max_tokens,
        max_completion_tokens=sc.max_completion_tokens,
        frequency_penalty=sc.frequency_penalty,
        presence_penalty=sc.presence_penalty,
        thinking=sc.thinking,
    )


def prepare_messages_with_history(chat: ChatManage) -> list[ChatMessage]:
    req, state = chat.request, chat.state
    base = state.system_prompt_override or req.summary_config.prompt
    system = render_prompt_placeholders(
        base, {"query": req.query, "language": req.language, "contexts": state.rendered_contexts}
    )
    if _MD_IMAGE.search(state.rendered_contexts or ""):
        system = system.rstrip(" \t\r\n") + RETRIEVED_IMAGE_REQUIREMENT
    system += state.memory_prompt
    messages = [ChatMessage("system", system)]
    for h in state.history:
        messages.append(ChatMessage("user", h.query))
        messages.append(ChatMessage("assistant", h.answer))
    images = list(req.images) + list(state.context_images) if req.chat_model_supports_vision else []
    messages.append(ChatMessage("user", state.user_content or req.query, images=images))
    return messages


def prepare_messages_with_model_context(
    chat: ChatManage, messages: list[ChatMessage]
) -> tuple[list[ChatMessage], Registry]:
    """Registry, protocol prompt, retrieval XML in place of the legacy contexts, encoding (§7)."""
    from rag_lab.modelcontext import (
        Registry,
        encode_messages,
        protocol_prompt,
        render_retrieval_contexts,
        substitute_retrieval_contexts,
    )

    req, state = chat.request, chat.state
    registry = Registry(citations_enabled=chat.citations_enabled())
    messages[0].content = messages[0].content.rstrip() + protocol_prompt(registry)
    if state.merge_result:
        xml = render_retrieval_contexts(
            state.merge_result,
            registry,
            faq_priority=req.faq_priority_enabled,
            web_snippet_max_runes=req.params.web_snippet_max_runes,
        )
        messages = substitute_retrieval_contexts(messages, state.rendered_contexts, xml)
    return encode_messages(messages, registry), registry
