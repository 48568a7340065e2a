"""QUERY_UNDERSTAND (outer plugin): rewrite + intent (+ image description) in one model call
(spec §4.3, seed "QUERY_UNDERSTAND").

* **Gate** (§4.3.1): ``rewrite_query = query``; skipped when rewriting is off and no image came.
* **History** (§4.3.2): LOAD_HISTORY's result, else the same algorithm with 20 messages.
* **Model** (§4.3.3): with images, the chat model when it has vision, else the VLM, else the text
  path (warning); on the text path the dedicated query-understanding model, falling back to the
  chat model when it cannot be loaded; no model at all skips the stage.
* **Prompt** (§4.3.4): the rewrite templates with ``conversation``, ``query`` (+ image marker,
  attachment prompt or ``<no_document_attached />``, asker background from the memory service)
  and ``language``; temperature 0.3, 150 tokens, 2,048 with images (seed), thinking off.
* **Parsing** (§4.3.5): tolerant JSON (fences, aliases, OCR merge); when the reply was cut by the
  token limit or does not parse, :func:`recover_truncated_understanding` reads what it can of the
  cut object. A rewrite or intent is taken only when its string is complete; a cut image
  description is kept (the text up to the cut). Nothing readable: original query, intent "".
* The intent is normalised (seed ``NormalizeQueryIntent``); a non-retrieval intent applies the
  intent prompt override; the image description is written, in the background, to the first
  image caption of the user message.
* **Structured output**: the call sends an OpenAI ``response_format`` of type ``json_schema``
  (:func:`understanding_response_format`; llama-server, vLLM and OpenAI constrain decoding to it,
  so even a tiny model replies with the object), its intent limited to the labels the request can
  act on (:func:`allowed_intents`); the tolerant parser still reads replies from endpoints that
  ignore it. Where the endpoint honours string bounds (llama-server), the strings get a
  ``maxLength`` that fits the token cap (the image description 0 without images), so a model that
  repeats itself still closes the object; a rewrite that reached its ``maxLength`` was cut and is
  dropped for the original query. A reply that is not the object logs one warning naming the
  stage, the finish reason and the query kept.
* **Rewrite check**: a rewrite that is not a question about the user's message —
  empty, without any word, a timestamp or the prompt's runtime line copied over, a piece of the
  prompt echoed back, a bare intent label — is dropped and the original query is kept
  (:func:`rewrite_rejection`; the reason goes to ``diagnostics["query_understand"]["rewrite_rejected"]``).
* A failed or timed-out call (one timeout: ``query_understand_timeout_s``, the stage's, or the
  model's ``models.chat.timeout_s`` when smaller, also given to the HTTP client) keeps the
  original query; the progress window reports it as not successful.
  The timeout applies to a remote model only (:mod:`rag_lab.models.timeouts`): an in-process model
  that follows instructions is waited for, whatever the machine's load.
* **Offline** (a model with ``follows_instructions = False``, the extractive answerer): no model
  call and no rewrite; :func:`detect_smalltalk` labels clear greetings and small talk (English and
  Chinese) ``greeting`` / ``chitchat``, everything else keeps intent "" (retrieval).

The pure helpers (prompt building, reply parsing and recovery, the small-talk detector) live in
:mod:`rag_lab.pipeline.understanding` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import logging

from rag_lab.models.base import ChatMessage, ChatModel, ChatOptions
from rag_lab.models.timeouts import ModelTimeout, call_with_timeout, is_in_process
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.load_history import load_and_process_history
from rag_lab.pipeline.understanding.parse import (
    DESC_KEYS,
    OCR_KEYS,
    OCR_LABEL,
    REWRITE_KEYS,
    merge_image_description,
    parse_query_understanding,
    recover_truncated_understanding,
    rewrite_rejection,
    scan_object_prefix,
)
from rag_lab.pipeline.understanding.prompt import (
    ASKER_BACKGROUND_NOTE,
    UNDERSTANDING_RESPONSE_FORMAT,
    allowed_intents,
    asker_background_block,
    build_understanding_query,
    format_conversation,
    understanding_response_format,
)
from rag_lab.pipeline.understanding.smalltalk import detect_smalltalk
from rag_lab.prompts.templates import render_prompt_placeholders
from rag_lab.types.chat_manage import ChatManage, History
from rag_lab.types.diagnostics import QueryUnderstandDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval, normalize_query_intent

__all__ = [
    "ASKER_BACKGROUND_NOTE",
    "DESC_KEYS",
    "OCR_KEYS",
    "OCR_LABEL",
    "REWRITE_KEYS",
    "TRUNCATION_REASONS",
    "UNDERSTANDING_RESPONSE_FORMAT",
    "PluginQueryUnderstand",
    "allowed_intents",
    "asker_background_block",
    "build_understanding_query",
    "detect_smalltalk",
    "format_conversation",
    "merge_image_description",
    "parse_query_understanding",
    "recover_truncated_understanding",
    "rewrite_rejection",
    "scan_object_prefix",
    "understanding_response_format",
]

log = logging.getLogger(__name__)

#: finish reasons that mean "cut by the token limit" (spec §4.12.3)
TRUNCATION_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})


# -- the plugin ----------------------------------------------------------------------------------
class PluginQueryUnderstand(StagePlugin):
    events = (EventType.QUERY_UNDERSTAND,)
    contract = StageContract(
        reads=(
            "request.attachments",
            "request.chat_model_id",
            "request.chat_model_supports_vision",
            "request.enable_rewrite",
            "request.images",
            "request.intent_prompt_overrides",
            "request.language",
            "request.max_rounds",
            "request.query",
            "request.query_understand_model_id",
            "request.rewrite_prompt_system",
            "request.rewrite_prompt_user",
            "request.session_id",
            "request.user_id",
            "request.vlm_model_id",
            "state.history",
            "state.image_description",
            "state.intent",
            "state.system_prompt_override",
        ),
        writes=(
            "state.diagnostics.query_understand",
            "state.history",
            "state.image_description",
            "state.intent",
            "state.rewrite_query",
            "state.system_prompt_override",
        ),
        params=(
            "query_understand_history_fetch",
            "query_understand_max_tokens",
            "query_understand_max_tokens_images",
            "query_understand_temperature",
            "query_understand_timeout_s",
        ),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req, state = chat.request, chat.state
        state.rewrite_query = req.query
        has_images = bool(req.images)
        if not req.enable_rewrite and not has_images:
            return await next()
        diag = QueryUnderstandDiagnostics()
        state.diagnostics["query_understand"] = diag

        history = await self._history(chat)
        picked = self._select_model(chat, has_images)
        if picked is None:
            log.error("query_understand: no chat model could be loaded, skipping the stage")
            diag["skipped"] = "no model"
            return await next()
        model, use_images = picked
        diag.update(model=getattr(model, "model_id", ""), images=use_images)

        if not getattr(model, "follows_instructions", True):
            label = detect_smalltalk(req.query)
            diag.update(path="offline", detected=label)
            state.intent = label
            if not needs_retrieval(chat):
                self._apply_intent_prompt_override(chat)
            return await next()

        from rag_lab.session.attachments import build_attachment_prompt

        try:
            attachment_prompt = build_attachment_prompt(req.attachments)
        except (TypeError, ValueError) as exc:
            log.warning("query_understand: attachments ignored: %s", exc)
            attachment_prompt = ""
        query = build_understanding_query(
            req.query, len(req.images), attachment_prompt, await self._asker_background(chat)
        )
        prompts = self.services.prompts
        tpl = prompts.get("default_rewrite") if prompts is not None and "default_rewrite" in prompts.by_id else None
        system_t = req.rewrite_prompt_system or (tpl.content if tpl else "")
        user_t = req.rewrite_prompt_user or (tpl.user if tpl else "{{query}}")
        values = {"conversation": format_conversation(history), "query": query, "language": req.language}
        messages = [
            ChatMessage("system", render_prompt_placeholders(system_t, values)),
            ChatMessage(
                "user", render_prompt_placeholders(user_t, values), images=list(req.images) if use_images else []
            ),
        ]
        p = req.params
        max_tokens = p.query_understand_max_tokens_images if use_images else p.query_understand_max_tokens
        response_format, rewrite_cap = await self._response_format(model, chat, has_images, use_images, max_tokens)
        options = ChatOptions(
            temperature=p.query_understand_temperature,
            max_completion_tokens=max_tokens,
            thinking=False,
            response_format=response_format,
            timeout=p.query_understand_timeout_s,
        )
        local = is_in_process(model)
        # the model's connect + first-token limit (models.chat.timeout_s) bounds a non-streamed
        # reply too; the smaller of it and the stage's applies, and the error names which
        param, seconds = "query_understand_timeout_s", p.query_understand_timeout_s
        first_s = getattr(model, "timeout_s", None)
        if isinstance(first_s, (int, float)) and 0 < first_s < seconds:
            param, seconds = "models.chat.timeout_s", float(first_s)
        options.timeout = seconds
        if local:
            options.timeout = None  # no client-side limit either
        try:
            resp = await call_with_timeout(
                model.chat(messages, options),
                in_process=local,
                stage="query_understand",
                param=param,
                seconds=seconds,
            )
        except ModelTimeout as exc:
            log.warning("query_understand call timed out, keeping the original query: %s", exc)
            diag["error"] = str(exc)
            return await next()
        except Exception as exc:
            log.warning("query_understand call failed, keeping the original query: %s", exc)
            diag["error"] = str(exc)
            return await next()

        content = resp.content or ""
        finish = (resp.finish_reason or "").lower()
        parsed = parse_query_understanding(content)
        partial = False
        if parsed is None and content.strip():
            parsed = recover_truncated_understanding(content)
            partial = parsed is not None
        diag.update(
            raw=content, finish_reason=finish, truncated=finish in TRUNCATION_REASONS, partial=partial, parsed=parsed
        )
        if parsed is None:
            log.warning(
                "query_understand: the reply is not the schema's object (finish_reason=%s, %d characters); "
                "kept the original query %r",
                finish or "none",
                len(content),
                req.query,
            )
        if parsed is not None:
            rewrite = parsed["rewrite_query"]
            if rewrite:
                why = rewrite_rejection(
                    rewrite,
                    "\n".join([req.query, values["conversation"]]),
                    "\n".join([system_t, user_t]),
                )
                if not why and rewrite_cap is not None and len(rewrite) >= rewrite_cap:
                    why = f"the rewrite reached the schema's maxLength of {rewrite_cap} characters (cut, not complete)"
                if why:
                    log.warning("query_understand: rewrite %r dropped, keeping the original query: %s", rewrite, why)
                    diag["rewrite_rejected"] = why
                else:
                    state.rewrite_query = rewrite
            state.intent = normalize_query_intent(parsed["intent"])
            state.image_description = parsed["image_description"]
            if state.image_description:
                self._write_back_caption(chat, state.image_description)
            if not needs_retrieval(chat):
                self._apply_intent_prompt_override(chat)
        return await next()

    # -- helpers ---------------------------------------------------------------------------------
    async def _response_format(
        self, model: ChatModel, chat: ChatManage, has_images: bool, use_images: bool, max_tokens: int
    ) -> tuple[dict[str, object], int | None]:
        """The call's ``response_format`` and the rewrite's ``maxLength`` (``None`` when unbounded).

        The schema's strings are bounded to fit ``max_tokens`` when the endpoint honours the
        bounds (``model.honours_schema_bounds()``, probed off the event loop); a token cap too
        small for any bound sends the schema unbounded, with a warning."""
        req = chat.request
        intents = allowed_intents(bool(req.web_search_enabled), has_images, bool(req.attachments))
        probe = getattr(model, "honours_schema_bounds", None)
        bounded = False
        if callable(probe):
            try:
                bounded = bool(await asyncio.to_thread(probe))
            except Exception as exc:  # a probe that fails means no bounds, never a failed stage
                log.info("query_understand: schema bounds not probed: %s", exc)
        if not bounded:
            return understanding_response_format(intents), None
        try:
            fmt = understanding_response_format(intents, max_tokens, images=use_images)
        except ValueError as exc:
            log.warning("query_understand: schema sent without string bounds: %s", exc)
            return understanding_response_format(intents), None
        return fmt, int(fmt["json_schema"]["schema"]["properties"]["rewrite_query"]["maxLength"])

    async def _history(self, chat: ChatManage) -> list[History]:
        """LOAD_HISTORY's rounds, else the fallback fetch of 20 messages (spec §4.3.2)."""
        req = chat.request
        if chat.state.history:
            return chat.state.history
        store = self.services.messages
        if req.max_rounds <= 0 or store is None or not req.session_id:
            return []
        try:
            history = await asyncio.to_thread(
                load_and_process_history,
                store,
                req.session_id,
                req.max_rounds,
                req.params.query_understand_history_fetch,
            )
        except Exception as exc:
            log.warning("query_understand: history unavailable, continuing without: %s", exc)
            return []
        chat.state.history = history
        return history

    def _load(self, model_id: str, role: str) -> ChatModel | None:
        try:
            return self.services.get_chat_model(model_id)
        except Exception as exc:
            log.warning("query_understand: %s model '%s' unavailable: %s", role, model_id, exc)
            return None

    def _select_model(self, chat: ChatManage, has_images: bool) -> tuple[ChatModel, bool] | None:
        """``(model, send_images)`` following spec §4.3.3, or None when nothing loads."""
        req = chat.request
        if has_images:
            if req.chat_model_supports_vision and req.chat_model_id:
                model = self._load(req.chat_model_id, "vision chat")
                if model is not None:
                    return model, True
            if req.vlm_model_id:
                model = self._load(req.vlm_model_id, "VLM")
                if model is not None:
                    return model, True
            log.warning("query_understand: %d image(s) but no vision model; using the text path", len(req.images))
        if req.query_understand_model_id:
            model = self._load(req.query_understand_model_id, "query-understanding")
            if model is not None:
                return model, False
        if req.chat_model_id:
            model = self._load(req.chat_model_id, "chat")
            if model is not None:
                return model, False
        return None

    async def _asker_background(self, chat: ChatManage) -> str:
        memory = self.services.memory
        fn = getattr(memory, "asker_background", None) if memory is not None else None
        if fn is None:
            return ""
        try:
            return asker_background_block(await asyncio.to_thread(fn, chat.request.user_id, chat.request.query))
        except Exception as exc:
            log.warning("query_understand: asker background unavailable: %s", exc)
            return ""

    def _write_back_caption(self, chat: ChatManage, description: str) -> None:
        """Store the description as the first image caption of the user message, off the
        request's path (the request only waits for it at its very end)."""
        store, ctx = self.services.messages, chat.context
        fn = getattr(store, "set_first_image_caption", None) if store is not None else None
        if fn is None or not ctx.user_message_id:
            return
        session_id, message_id = chat.request.session_id, ctx.user_message_id

        async def write() -> None:
            try:
                if not await asyncio.to_thread(fn, session_id, message_id, description):
                    log.info("query_understand: user message '%s' stores no image to caption", message_id)
            except Exception as exc:
                log.warning("query_understand: image caption not saved: %s", exc)

        ctx.background_tasks.append(asyncio.ensure_future(write()))

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
