"""A run's turn in its session: the user message written before the run (§3.1 step 1) and the
assistant message written once it is over, completed as §9.1 says. :class:`LabTurns` is one of
the mixins :class:`~rag_lab.lab.lab.Lab` is made of.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from rag_lab.lab.parts import LabParts
from rag_lab.pipeline.qa import QAOutcome
from rag_lab.types.chat_manage import ChatManage

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import MessageService
    from rag_lab.session.sqlite_schema import Session
    from rag_lab.types.search_result import SearchResult


class _Completion(TypedDict, total=False):
    """What a finished turn's message is stored with."""

    knowledge_references: list[SearchResult]
    is_fallback: bool


def ensure_owned_session(store: MessageService, session_id: str, user_id: str, tenant_id: int = 0) -> Session:
    """The session, created for (user, tenant) when missing. A session owned by anyone else
    raises ``SessionNotFound``, exactly as a missing one would read (its history is never loaded)."""
    session = store.ensure_session(session_id, user_id, tenant_id=tenant_id)
    owner = (getattr(session, "user_id", user_id), getattr(session, "tenant_id", tenant_id))
    if owner != (user_id, tenant_id):
        from rag_lab.session.sqlite_store import SessionNotFound

        raise SessionNotFound(f"session '{session_id}' not found")
    return session


class LabTurns(LabParts):
    """The messages of a remembered run, in the lab's message store."""

    def _open_turn(self, chat: ChatManage, user_id: str, tenant_id: int) -> None:
        """The session (created for the caller when new) and the user message, which exists
        before the run (§3.1 step 1)."""
        store = self.services.messages
        if store is None:
            return
        ensure_owned_session(store, chat.request.session_id, user_id, tenant_id)
        chat.context.user_message_id = store.insert_message(
            chat.request.session_id,
            "user",
            chat.request.query,
            chat.context.message_id,
            image_urls=list(chat.request.images),
        )

    async def _remember_turn(
        self, chat: ChatManage, outcome: QAOutcome, saved: Callable[[], None] | None = None
    ) -> None:
        """The assistant message with the answer so far (partial when the run was stopped),
        completed as §9.1 says: references, memories, cited documents, explicit facts.

        The message is written once the run is over, so a finished (or stopped) turn is stored
        completed in one write, then §9.1 step 2 runs; a turn that failed stays incomplete."""
        from rag_lab.session.completion import start_after_completion

        store = self.services.messages
        if store is None:
            return
        sid = chat.request.session_id
        finished = outcome.completed or outcome.cancelled
        completion: _Completion = (
            {"knowledge_references": chat.state.merge_result, "is_fallback": outcome.is_fallback} if finished else {}
        )
        message_id = store.insert_message(
            sid,
            "assistant",
            outcome.answer,
            chat.context.message_id,
            is_completed=finished,
            used_memories=list(chat.state.used_memories),
            **completion,
        )
        if saved is not None:  # the turn is stored: its ``complete`` may go out now
            saved()
        if finished:
            await start_after_completion(
                sid,
                message_id,
                content=outcome.answer,
                knowledge_references=chat.state.merge_result,
                query="" if outcome.cancelled else chat.request.query,
                user_id=chat.request.user_id,
                memory=self.services.memory,
            )
