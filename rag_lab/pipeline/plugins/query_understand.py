"""QUERY_UNDERSTAND (outer plugin): rewrite + intent (+ image description) in one model call,
with tolerant JSON parsing (spec §4.3, seed). The intent is normalised (seed
``NormalizeQueryIntent``). A model that cannot follow the rewrite prompt (the offline extractive
answerer declares ``follows_instructions = False``) takes the spec's failure path: the original
query and an empty intent, i.e. retrieval."""
from __future__ import annotations

import json
import logging
from typing import Any

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.prompts.templates import render_prompt_placeholders
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval, normalize_query_intent

log = logging.getLogger(__name__)

REWRITE_KEYS = ("rewrite_query", "rewritten_query", "query", "question")
DESC_KEYS = ("image_description", "image_desc", "image_text", "image_ocr_text", "description")
OCR_KEYS = ("ocr_text", "ocr", "full_ocr", "image_ocr", "ocr_content")


def _first_str(obj: dict, keys: tuple[str, ...]) -> str:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v.strip()
    return ""


def parse_query_understanding(text: str) -> dict[str, str] | None:
    """``{"rewrite_query", "intent", "image_description"}`` from a model reply, or None when no
    JSON object can be read (then nothing changes)."""
    t = text.strip()
    if not t:
        return None
    obj: Any = None
    try:
        obj = json.loads(t)
    except ValueError:
        a, b = t.find("{"), t.rfind("}")
        if a != -1 and b > a:
            try:
                obj = json.loads(t[a : b + 1])
            except ValueError:
                obj = None
    if not isinstance(obj, dict):
        return None
    desc, ocr = _first_str(obj, DESC_KEYS), _first_str(obj, OCR_KEYS)
    if desc and ocr and ocr not in desc:
        image_description = f"{desc}\n\n[OCR]\n{ocr}"
    else:
        image_description = desc or ocr
    intent = obj.get("intent")
    return {
        "rewrite_query": _first_str(obj, REWRITE_KEYS),
        "intent": intent.strip() if isinstance(intent, str) else "",
        "image_description": image_description,
    }


def format_conversation(history) -> str:
    return "".join(
        f"------BEGIN------\nUser question: {h.query}\nAssistant answer: {h.answer}\n------END------\n" for h in history
    )


class PluginQueryUnderstand(StagePlugin):
    events = (EventType.QUERY_UNDERSTAND,)

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req, state, p = chat.request, chat.state, chat.request.params
        state.rewrite_query = req.query
        has_images = bool(req.images)
        if not req.enable_rewrite and not has_images:
            return await next()

        model = None
        for model_id in (req.query_understand_model_id, req.chat_model_id):
            if not model_id:
                continue
            try:
                model = self.services.get_chat_model(model_id)
                break
            except Exception as exc:
                log.warning("query_understand: model '%s' unavailable: %s", model_id, exc)
        if model is None:
            log.error("query_understand: no model, skipping")
            return await next()
        if not getattr(model, "follows_instructions", True):
            state.diagnostics["query_understand"] = {"skipped": f"{model.model_id} does not follow instructions"}
            return await next()

        prompts = self.services.prompts
        tpl = prompts.get("default_rewrite") if prompts is not None else None
        system_t = req.rewrite_prompt_system or (tpl.content if tpl else "")
        user_t = req.rewrite_prompt_user or (tpl.user if tpl else "{{query}}")
        query = req.query + (f'\n\n<images_uploaded count="{len(req.images)}" />' if has_images else "\n\n<no_image_attached />")
        query += "\n<no_document_attached />" if not req.attachments else ""
        values = {"conversation": format_conversation(state.history), "query": query, "language": req.language}
        messages = [
            ChatMessage("system", render_prompt_placeholders(system_t, values)),
            ChatMessage("user", render_prompt_placeholders(user_t, values), images=list(req.images) if has_images else []),
        ]
        options = ChatOptions(
            temperature=p.query_understand_temperature,
            max_completion_tokens=p.query_understand_max_tokens_images if has_images else p.query_understand_max_tokens,
            thinking=False,
        )
        try:
            resp = await model.chat(messages, options)
        except Exception as exc:
            log.warning("query_understand call failed: %s", exc)
            return await next()
        parsed = parse_query_understanding(resp.content)
        state.diagnostics["query_understand"] = {"raw": resp.content, "parsed": parsed}
        if parsed is not None:
            if parsed["rewrite_query"]:
                state.rewrite_query = parsed["rewrite_query"]
            state.intent = normalize_query_intent(parsed["intent"])
            state.image_description = parsed["image_description"]
            if not needs_retrieval(chat):
                self._apply_intent_prompt_override(chat)
        return await next()

    def _apply_intent_prompt_override(self, chat: ChatManage) -> None:
        intent = chat.state.intent
        override = chat.request.intent_prompt_overrides.get(intent, "")
        if override.strip():
            chat.state.system_prompt_override = override
            return
        if not chat.state.system_prompt_override and self.services.prompts is not None:
            text = self.services.prompts.intent_prompts().get(intent)
            if text:
                chat.state.system_prompt_override = text
