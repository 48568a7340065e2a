"""Completing the assistant message at the end of a stream or on stop (spec §9.1).

Step 1 saves the answer (content, references, fallback flag, agent steps, used memories) with
``is_completed`` and ``updated_at``. Step 2 runs in the background, on a task of its own that the
request's cancellation does not reach: the chat-history index (when configured) and long-term
memory (explicit "remember ..." facts, cited documents, background extraction). Every step of
step 2 is independent: one failing is logged and the others still run.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from rag_lab.memory.extract import explicit_memory
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:
    from rag_lab.session.message_rows import MessageRows
    from rag_lab.session.store import MemoryMessageStore

log = logging.getLogger(__name__)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
#: importance of a fact the user explicitly asked to remember (spec §9.1)
EXPLICIT_FACT_IMPORTANCE: int = PipelineParams.model_fields["memory_explicit_importance"].default


def history_passage(session_id: str, query: str, answer: str) -> str | None:
    """The chat-history KB passage of one turn, or None when there is nothing to index (the
    answer loses its ``<think>`` blocks; a stopped turn may have an empty query)."""
    answer = _THINK.sub("", answer).strip()
    if not query and not answer:
        return None
    return f"[Session: {session_id}]\nQ: {query}\nA: {answer}"


async def complete_assistant_message(
    store: MessageRows | MemoryMessageStore,
    session_id: str,
    message_id: str,
    *,
    content: str,
    knowledge_references: Iterable[object] = (),
    is_fallback: bool = False,
    used_memories: Iterable[object] = (),
    agent_steps: Iterable[object] = (),
    query: str = "",
    user_id: str = "",
    memory: Any = None,
    history_indexer: Callable[..., object] | None = None,
) -> asyncio.Task[object]:
    """Save the answer (step 1, awaited) and start step 2; returns step 2's task.

    ``history_indexer(passage, session_id=..., message_id=...)`` indexes the turn into the
    chat-history KB (sync or async). ``query`` is "" for a stopped turn: then only the index runs.
    """
    refs = list(knowledge_references)
    await asyncio.to_thread(
        store.finish_message,
        session_id,
        message_id,
        content=content,
        knowledge_references=refs,
        is_fallback=is_fallback,
        used_memories=list(used_memories),
        agent_steps=list(agent_steps),
    )
    return start_after_completion(
        session_id,
        message_id,
        content=content,
        knowledge_references=refs,
        query=query,
        user_id=user_id,
        memory=memory,
        history_indexer=history_indexer,
    )


def start_after_completion(
    session_id: str,
    message_id: str,
    *,
    content: str,
    knowledge_references: Iterable[object] = (),
    query: str = "",
    user_id: str = "",
    memory: Any = None,
    history_indexer: Callable[..., object] | None = None,
) -> asyncio.Task[object]:
    """Step 2 alone, for a message already saved completed (the lab stores a finished turn's
    answer in one write): the chat-history index and long-term memory, on a task of its own."""
    refs = list(knowledge_references)

    async def after() -> dict[str, object]:
        done: dict[str, object] = {"indexed": False, "fact": None, "cited": 0, "extracted": False}
        passage = history_passage(session_id, query, content)
        if history_indexer is not None and passage is not None:
            try:
                res = history_indexer(passage, session_id=session_id, message_id=message_id)
                if asyncio.iscoroutine(res):
                    await res
                done["indexed"] = True
            except Exception as exc:
                log.warning("chat-history indexing of message '%s' failed: %s", message_id, exc)
        if memory is None or not query:
            return done
        fact = explicit_memory(query)
        if fact:
            try:
                await asyncio.to_thread(
                    memory.add_memory,
                    user_id,
                    fact,
                    kind="fact",
                    importance=EXPLICIT_FACT_IMPORTANCE,
                    source_session_id=session_id,
                    source_message_id=message_id,
                )
                done["fact"] = fact
            except Exception as exc:
                log.warning("explicit memory not stored: %s", exc)
        try:
            done["cited"] = await asyncio.to_thread(
                memory.record_citations, user_id, refs, session_id=session_id, message_id=message_id
            )
        except Exception as exc:
            log.warning("cited documents not recorded: %s", exc)
        extract = getattr(memory, "extract_background", None)
        if extract is not None:
            try:
                await asyncio.to_thread(extract, user_id, query, content)
                done["extracted"] = True
            except Exception as exc:
                log.warning("background memory extraction failed: %s", exc)
        return done

    return asyncio.ensure_future(after())
