"""INTO_CHAT_MESSAGE: validate the query and assemble the user turn with its contexts (§4.11)."""

from __future__ import annotations

import logging
import re

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrTemplateExecute, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.context_images import collect_context_images
from rag_lab.prompts.templates import IMAGE_CONTENT_LABEL, render_prompt_placeholders
from rag_lab.searchutil.text import html_escape5 as _escape5
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.search_result import SearchResult

log = logging.getLogger(__name__)

_INJECTION = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"<script[^>]*>.*?</script>",
        r"<iframe[^>]*>.*?</iframe>",
        r"<object[^>]*>.*?</object>",
        r"<embed[^>]*>.*?</embed>",
        r"<form[^>]*>.*?</form>",
        r"<button[^>]*>.*?</button>",
        r"<embed[^>]*>",
        r"<input[^>]*>",
        r"javascript:",
        r"vbscript:",
        r"on(?:load|error|click|mouseover|focus|blur)\s*=",
    )
]


def validate_input(text: str) -> tuple[bool, str]:
    """``(ok, trimmed)``: rejects control characters, invalid UTF-8 and injection markup."""
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return False, ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False, ""
    if any(p.search(text) for p in _INJECTION):
        return False, ""
    return True, text.strip()


def build_document_header(results: list[SearchResult]) -> str:
    seen: set[str] = set()
    parts: list[str] = []
    for r in results:
        if not r.knowledge_id or r.knowledge_id in seen:
            continue
        seen.add(r.knowledge_id)
        title = r.knowledge_title or r.knowledge_filename
        if not title:
            continue
        block = f"<document>\n<title>{_escape5(title)}</title>\n"
        if r.knowledge_description:
            block += f"<description>{_escape5(r.knowledge_description)}</description>\n"
        if r.knowledge_custom_metadata:
            block += f"<metadata>{_escape5(r.knowledge_custom_metadata)}</metadata>\n"
        parts.append(block + "</document>\n")
    return "<documents>\n" + "".join(parts) + "</documents>" if parts else ""


def _append_extras(chat: ChatManage, text: str) -> str:
    s, r = chat.state, chat.request
    if s.image_description and not r.chat_model_supports_vision:
        text += IMAGE_CONTENT_LABEL + s.image_description
    if s.quoted_context:
        text += "\n\n" + s.quoted_context
    for att in r.attachments:
        prompt = getattr(att, "prompt", None) or (att.get("prompt") if isinstance(att, dict) else None)
        if prompt:
            text += "\n\n" + str(prompt)
    return text


class PluginIntoChatMessage(StagePlugin):
    events = (EventType.INTO_CHAT_MESSAGE,)
    contract = StageContract(
        reads=(
            "context.user_message_id",
            "request.attachments",
            "request.chat_model_supports_vision",
            "request.faq_direct_answer_threshold",
            "request.faq_priority_enabled",
            "request.language",
            "request.query",
            "request.session_id",
            "request.summary_config",
            "state.image_description",
            "state.intent",
            "state.merge_result",
            "state.quoted_context",
            "state.user_content",
        ),
        writes=("state.context_images", "state.rendered_contexts", "state.user_content"),
        params=(),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        from rag_lab.modelcontext import chat_passage

        req, state = chat.request, chat.state
        template = req.summary_config.context_template
        ok, safe_query = validate_input(req.query)
        if not ok:
            return ErrTemplateExecute.with_error(ValueError("user query contains invalid content"))

        if not needs_retrieval(chat):
            # the user's own words on both paths (upstream sends the rewrite here and the original
            # on the RAG path, B.10); the history messages give the model the context the rewrite
            # resolved, and the rewrite stays a search artefact
            user = _append_extras(chat, safe_query)
            if template:
                user = render_prompt_placeholders(template, {"query": user, "contexts": "", "language": req.language})
            state.user_content = user
            return await next()

        results = state.merge_result
        faq: list[SearchResult] = []
        docs: list[SearchResult] = []
        if req.faq_priority_enabled:
            for r in results:
                (faq if r.chunk_type == "faq" else docs).append(r)
        high_conf = any(r.score >= req.faq_direct_answer_threshold for r in faq)
        ordered = faq + docs if (req.faq_priority_enabled and faq) else list(results)

        header = build_document_header(ordered)
        out = header + "\n" if header else ""
        if req.faq_priority_enabled and faq:
            out += '<source type="faq" priority="high">\n'
            for i, r in enumerate(faq, 1):
                exact = ' match="exact"' if (i == 1 and high_conf) else ""
                out += f'<context id="FAQ-{i}"{exact}>{chat_passage(r)}</context>\n'
            out += "</source>\n"
            if docs:
                out += '<source type="document" priority="supplementary">\n'
                out += "".join(f'<context id="DOC-{i}">{chat_passage(r)}</context>\n' for i, r in enumerate(docs, 1))
                out += "</source>"
        else:
            out += "\n".join(f'<context id="{i}">{chat_passage(r)}</context>' for i, r in enumerate(results, 1))
        state.rendered_contexts = out
        user = (
            render_prompt_placeholders(template, {"query": safe_query, "contexts": out, "language": req.language})
            if template
            else ""
        )
        state.user_content = _append_extras(chat, user)
        if req.chat_model_supports_vision:
            ws = self.services.workspace
            state.context_images = collect_context_images(results, req.params, getattr(ws, "root", None))
        self._persist_rendered_content(chat)
        return await next()

    def _persist_rendered_content(self, chat: ChatManage) -> None:
        """The user message keeps what the model saw (§4.11), never blocking the answer."""
        store, ctx = self.services.messages, chat.context
        content = chat.state.user_content
        if store is None or not ctx.user_message_id or not content or content == chat.request.query:
            return
        try:
            store.update_message(chat.request.session_id, ctx.user_message_id, rendered_content=content)
        except Exception as exc:
            log.warning("rendered content not persisted: %s", exc)
