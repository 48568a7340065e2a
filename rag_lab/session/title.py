"""Session title generation (spec §9.2): one chat call on the first turn, in the background.

The system message is the ``generate_session_title`` template rendered with ``language``; the user
message is the first question. The reply is sanitised (an empty ``<think>`` prefix removed,
trimmed, cut to 100 runes), saved on the session and announced with a ``session_title`` bus event.
Errors are logged and announce nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.models.timeouts import call_with_timeout, is_in_process
from rag_lab.prompts.templates import PromptTemplates, default_templates, render_prompt_placeholders
from rag_lab.stream.bus import BusEventType
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:
    from rag_lab.models.base import ChatModel
    from rag_lab.observability.ledger import Ledger
    from rag_lab.session.session_rows import SessionRows
    from rag_lab.stream.bus import EventBus

log = logging.getLogger(__name__)

TITLE_TEMPLATE_ID = "default_session_title"
#: the empty reasoning block some models put before the answer when thinking is off
EMPTY_THINK_PREFIX = "<think>\n\n</think>"
TITLE_MAX_RUNES: int = PipelineParams.model_fields["session_title_max_runes"].default
TITLE_TEMPERATURE: float = PipelineParams.model_fields["session_title_temperature"].default
#: token cap of the title call: a title is a few words, and a model that ignores the instruction
#: (or thinks aloud) must not keep generating after the answer has ended
TITLE_MAX_TOKENS = 48
#: seconds the title call of a remote model may take (an in-process model has no limit:
#: rag_lab.models.timeouts)
TITLE_TIMEOUT_S = 30.0


def sanitize_title(text: str, max_runes: int = TITLE_MAX_RUNES) -> str:
    """Drop the empty-think prefix, trim, keep at most ``max_runes`` characters, trim again."""
    if max_runes < 1:
        raise ValueError(f"max_runes must be >= 1, got {max_runes}")
    t = text
    if t.startswith(EMPTY_THINK_PREFIX):
        t = t[len(EMPTY_THINK_PREFIX) :]
    t = t.strip()
    if len(t) > max_runes:
        t = t[:max_runes].strip()
    return t


async def generate_title(
    model: ChatModel,
    query: str,
    *,
    language: str = "English",
    prompts: PromptTemplates | None = None,
    overrides: Mapping[str, object] | None = None,
    max_runes: int = TITLE_MAX_RUNES,
) -> str:
    """The sanitised title the model proposes for a conversation starting with ``query``."""
    templates = prompts or default_templates()
    system = render_prompt_placeholders(templates.resolve(TITLE_TEMPLATE_ID, overrides), {"language": language})
    resp = await model.chat(
        [ChatMessage("system", system), ChatMessage("user", query)],
        ChatOptions(
            temperature=TITLE_TEMPERATURE,
            thinking=False,
            max_completion_tokens=TITLE_MAX_TOKENS,
            timeout=TITLE_TIMEOUT_S,
        ),
    )
    return sanitize_title(resp.content, max_runes)


def generate_title_async(
    store: SessionRows,
    session_id: str,
    query: str,
    model: ChatModel | None,
    *,
    language: str = "English",
    bus: EventBus | None = None,
    prompts: PromptTemplates | None = None,
    overrides: Mapping[str, object] | None = None,
    enabled: bool = True,
    ledger: Ledger | None = None,
) -> asyncio.Task[str] | None:
    """Start title generation when enabled, the model follows instructions and the session has
    no title; the task (or None).

    The task resolves to the saved title, or ``""`` when nothing was saved (model error, empty
    reply, a title set meanwhile). It is independent of the caller: cancelling the request that
    started it does not cancel it. ``ledger`` (a :class:`~rag_lab.observability.ledger.Ledger`)
    receives the call, under the stage ``session_title``; it is bounded by ``TITLE_MAX_TOKENS``
    tokens and, for a remote model, ``TITLE_TIMEOUT_S`` seconds (an in-process model that follows
    instructions is waited for: a title is a background task and blocks no answer).
    """
    if not enabled or model is None:
        return None
    if not getattr(model, "follows_instructions", True):
        # the offline extractive answerer would return retrieved sentences, not a title
        log.info("title generation skipped: model %s does not follow instructions", getattr(model, "model_id", model))
        return None
    try:
        if store.get_session(session_id).title:
            return None
    except Exception as exc:
        log.warning("title generation: session '%s' unavailable: %s", session_id, exc)
        return None

    async def run() -> str:
        from rag_lab.observability.ledger import reset_stage, set_stage, use_ledger

        try:
            token = set_stage("session_title")

            def call() -> Awaitable[str]:
                return call_with_timeout(
                    generate_title(model, query, language=language, prompts=prompts, overrides=overrides),
                    in_process=is_in_process(model),
                    stage="session_title",
                    param="TITLE_TIMEOUT_S",
                    seconds=TITLE_TIMEOUT_S,
                )

            try:
                if ledger is not None:
                    with use_ledger(ledger):
                        title = await call()
                else:
                    title = await call()
            finally:
                reset_stage(token)
            if not title:
                log.warning("title generation for session '%s': the model returned an empty title", session_id)
                return ""
            current = await asyncio.to_thread(store.get_session, session_id)
            if current.title:  # set by someone else while the model was thinking
                return ""
            await asyncio.to_thread(store.update_session, session_id, title=title)
        except Exception as exc:
            log.warning("title generation for session '%s' failed: %s", session_id, exc)
            return ""
        if bus is not None:
            try:
                bus.emit(BusEventType.SESSION_TITLE, {"session_id": session_id, "title": title})
            except Exception as exc:
                log.warning("session_title event not delivered: %s", exc)
        return str(title)

    return asyncio.ensure_future(run())
