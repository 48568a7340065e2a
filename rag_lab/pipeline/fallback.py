"""The answer given when retrieval finds nothing (ErrSearchNothing), spec §3.6."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.prompts.templates import IMAGE_CONTENT_LABEL, render_prompt_placeholders
from rag_lab.stream.bus import BusEventType, short_id
from rag_lab.types.chat_manage import ChatManage

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import Services

log = logging.getLogger(__name__)

#: what the fallback answers write, outside any stage (the lab's final snapshot copies them)
FALLBACK_WRITES = frozenset({"state.chat_response", "state.diagnostics.model_error"})


def emit_fixed_fallback(chat: ChatManage) -> None:
    from rag_lab.modelcontext import Registry, decode_output_text

    text = chat.request.fallback_response
    chat.state.chat_response = text
    bus = chat.context.event_bus
    if bus is None:
        return
    if not chat.citations_enabled():
        text = decode_output_text(text, Registry(citations_enabled=False))
    bus.emit(
        BusEventType.FINAL_ANSWER,
        {"content": text, "done": True, "is_fallback": True},
        event_id=f"{short_id()}-fallback",
    )


MODEL_FAILURE_INTRO = "The language model could not finish this answer. These sources were found for your question:"
#: most references listed in a model-failure answer
MODEL_FAILURE_MAX_SOURCES = 10
_URL = re.compile(r"https?://\S+")


def model_failure_text(chat: ChatManage) -> str:
    """The fallback answer after a chat-model failure (ours, after §3.6): the documents of the
    references already found (``model_failure_answer: references``, the default), else the fixed
    fallback text."""
    refs = chat.state.merge_result
    if chat.request.params.model_failure_answer != "references" or not refs:
        return chat.request.fallback_response
    lines: list[str] = []
    for r in refs:
        title = r.knowledge_title or r.knowledge_filename or r.knowledge_id
        line = f"- {title}"
        if title and line not in lines:
            lines.append(line)
        if len(lines) >= MODEL_FAILURE_MAX_SOURCES:
            break
    return MODEL_FAILURE_INTRO + "\n" + "\n".join(lines)


def public_model_error(error: str) -> str:
    """The model error as stream readers see it: endpoint URLs removed (the full text is in the
    run's ``error`` and the server log)."""
    return _URL.sub("<model endpoint>", error).strip() or "model failure"


def emit_model_failure_fallback(chat: ChatManage, error: str, partial: str = "") -> None:
    """After the answer model failed: record the failure (``Run.error``), keep the partial answer
    and emit the fallback answer as a separate done ``final_answer`` with ``is_fallback``."""
    text = model_failure_text(chat)
    if partial.strip():
        text = "\n\n" + text
    chat.state.diagnostics["model_error"] = error
    chat.state.chat_response = partial + text
    bus = chat.context.event_bus
    if bus is None:
        return
    bus.emit(
        BusEventType.FINAL_ANSWER,
        {"content": text, "done": True, "is_fallback": True, "model_error": public_model_error(error)},
        event_id=f"{short_id()}-fallback",
    )


def kb_documents_listing(chat: ChatManage, services: Services) -> str:
    """``- title (type): description`` per enabled document of the KBs in scope, at most N."""
    ws = services.workspace
    if ws is None:
        return ""
    p = chat.request.params
    kb_ids: list[str] = []
    for kid in [t.knowledge_base_id for t in chat.request.search_targets] + list(chat.request.knowledge_base_ids):
        if kid and kid not in kb_ids:
            kb_ids.append(kid)
    lines: list[str] = []
    for kb_id in kb_ids:
        for doc in ws.store.list_knowledge(kb_id):
            if doc.enable_status != "enabled":
                continue
            title = doc.title or doc.file_name
            if not title:
                continue
            if len(lines) >= p.fallback_listing_max_docs:
                return "".join(lines) + f"... (showing first {p.fallback_listing_max_docs} documents)\n"
            line = f"- {title}"
            if doc.file_type:
                line += f" ({doc.file_type})"
            if doc.description:
                desc = doc.description
                if len(desc) > p.fallback_description_max_runes:
                    desc = desc[: p.fallback_description_max_runes] + "..."
                line += f": {desc}"
            lines.append(line + "\n")
    return "".join(lines)


async def handle_fallback_response(chat: ChatManage, services: Services) -> None:
    if chat.request.fallback_strategy != "model":
        emit_fixed_fallback(chat)
        return
    await _model_fallback(chat, services)


async def _model_fallback(chat: ChatManage, services: Services) -> None:
    from rag_lab.modelcontext import Registry, StreamDecoder, encode_messages, protocol_prompt

    req, state = chat.request, chat.state
    bus = chat.context.event_bus
    if not req.fallback_prompt.strip() or bus is None:
        emit_fixed_fallback(chat)
        return
    try:
        model = services.get_chat_model(req.chat_model_id)
    except Exception as exc:  # lookup failure degrades to the fixed text
        log.warning("model fallback: chat model lookup failed: %s", exc)
        emit_fixed_fallback(chat)
        return
    q = state.rewrite_query if state.rewrite_query.strip() else req.query
    prompt = render_prompt_placeholders(
        req.fallback_prompt,
        {"query": q, "language": req.language, "kb_documents": kb_documents_listing(chat, services)},
    )
    if state.image_description and not req.chat_model_supports_vision:
        prompt += IMAGE_CONTENT_LABEL + state.image_description
    if state.quoted_context:
        prompt += "\n\n" + state.quoted_context
    messages: list[ChatMessage] = []
    if prompt.strip():
        messages.append(ChatMessage("system", prompt))
    for h in state.history:
        messages += [ChatMessage("user", h.query), ChatMessage("assistant", h.answer)]
    messages.append(ChatMessage("user", q, images=list(req.images) if req.chat_model_supports_vision else []))

    registry = Registry(citations_enabled=chat.citations_enabled())
    if messages[0].role == "system":
        messages[0].content = messages[0].content.rstrip() + protocol_prompt(registry)
    else:
        messages.insert(0, ChatMessage("system", protocol_prompt(registry).strip()))
    messages = encode_messages(messages, registry)
    options = ChatOptions(
        temperature=req.summary_config.temperature,
        max_completion_tokens=req.summary_config.max_completion_tokens,
        thinking=False,
    )
    try:
        stream = model.chat_stream(messages, options)
    except Exception as exc:
        log.warning("model fallback: stream start failed: %s", exc)
        emit_fixed_fallback(chat)
        return
    if stream is None:
        emit_fixed_fallback(chat)
        return

    async def consume() -> None:
        event_id = f"{short_id()}-fallback"
        decoder = StreamDecoder(registry)
        acc = ""
        try:
            async for chunk in stream:
                if chunk.response_type != "answer":
                    continue
                content = decoder.feed(chunk.content)
                if chunk.done:
                    content += decoder.flush()
                acc += content
                bus.emit(
                    BusEventType.FINAL_ANSWER,
                    {"content": content, "done": chunk.done, "is_fallback": True},
                    event_id=event_id,
                )
                if chunk.done:
                    state.chat_response = acc
                    return
        except Exception as exc:  # a broken stream ends like a closed channel
            log.warning("model fallback stream failed: %s", exc)
        emit_fixed_fallback(chat)

    chat.context.background_tasks.append(asyncio.ensure_future(consume()))
