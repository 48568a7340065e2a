"""The state behind the chat server's endpoints (:class:`StreamService`): the lab, the event log,
the message directory and the generations running in this process; starting a generation as a
server-owned task, its stop watcher, crash-recovery heartbeats, following a log as SSE frames,
ownership of sessions and KBs, and stop.

This module holds the endpoints' logic (sessions and KBs the caller owns, stop); the rest is split
by responsibility: :mod:`rag_lab.stream.server_state` (the state, :class:`Generation`, appending
to the log), :mod:`rag_lab.stream.server_generate` (running, watching and settling generations),
:mod:`rag_lab.stream.server_lifecycle` (startup, crash recovery, maintenance, shutdown) and
:mod:`rag_lab.stream.server_follow` (a log as SSE frames).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rag_lab.stream.auth import Principal
from rag_lab.stream.server_follow import LogFollower
from rag_lab.stream.server_http import ApiError, owns
from rag_lab.stream.server_lifecycle import ServiceLifecycle
from rag_lab.stream.server_state import Generation
from rag_lab.types.stream import STOP_RESPONSE_TYPE, ResponseType

if TYPE_CHECKING:
    from rag_lab.session.sqlite_schema import Session

__all__ = ["Generation", "StreamService"]

#: the server's logger name, unchanged by the split into modules (log filters keep working)
log = logging.getLogger("rag_lab.stream.server")


class StreamService(ServiceLifecycle, LogFollower):
    """The state behind the endpoints: the lab, the log, the directory, running generations."""

    # -- endpoints' logic ----------------------------------------------------------------
    async def owned_session(self, session_id: str, principal: Principal) -> Session:
        """The caller's session from the SQLite store; missing and not-yours are the same 404."""
        from rag_lab.session.sqlite_store import SessionNotFound

        try:
            session = await self.call(self.sessions.get_session, session_id)
        except SessionNotFound:
            session = None
        if session is None or not owns(session, principal):
            raise ApiError(404, "Session not found", "session_id")
        return session

    async def session_for_ask(self, session_id: str, principal: Principal) -> Session:
        """The session an ask goes to: the caller's own, or (when the server creates sessions on
        first use) a new one owned by the caller. Someone else's is 404, like a missing one."""
        from rag_lab.session.sqlite_store import SessionNotFound

        try:
            return await self.owned_session(session_id, principal)
        except ApiError:
            if not self.config.creates_sessions:
                raise
        try:
            await self.call(self.sessions.get_session, session_id)
            raise ApiError(404, "Session not found", "session_id")  # exists, not the caller's
        except SessionNotFound:
            pass
        try:
            await self.call(
                lambda: self.sessions.create_session(
                    principal.user_id, session_id=session_id, tenant_id=principal.tenant_id
                )
            )
        except ValueError:  # created by someone else in between
            pass
        return await self.owned_session(session_id, principal)

    async def request_id_of(self, session_id: str, message_id: str) -> str:
        gen = self.generations.get((session_id, message_id))
        if gen is not None:
            return gen.request_id
        rid = await self.call(self.directory.message_request_id, session_id, message_id)
        return rid or message_id

    def resolve_kbs(self, names: list[str], principal: Principal) -> list[str]:
        """KB ids for names or ids the caller's tenant may search. An unknown KB and another
        tenant's KB get the same 400, which names only what the caller sent."""
        from rag_lab.retrieval.hybrid_search import can_view

        store = self.lab.workspace.store
        out: list[str] = []
        for name in names:
            kb = store.get_kb(name) or store.get_kb_by_name(name)
            if kb is None or not can_view(kb, principal.tenant_id):
                raise ApiError(400, f"knowledge_base_ids: unknown knowledge base {name!r}", "knowledge_base_ids")
            if kb.id not in out:
                out.append(kb.id)
        return out

    async def stop(self, session_id: str, message_id: str) -> dict[str, object]:
        gen = self.generations.get((session_id, message_id))
        events, _ = await self.call(self.manager.get_events, session_id, message_id, 0)
        if gen is None and not events:
            if await self.call(self.sessions.find_message, session_id, message_id) is not None:
                return {"success": True, "message": "Message already completed"}  # its log is gone
            raise ApiError(404, "Message not found", "message_id")
        kinds = {e.type for e in events}
        if STOP_RESPONSE_TYPE in kinds:
            return {"success": True, "message": "Generation already stopped"}
        if ResponseType.COMPLETE.value in kinds or (gen is not None and gen.finished()):
            return {"success": True, "message": "Message already completed"}
        if gen is None:  # running elsewhere (another replica): its stop watcher reads this
            try:
                await self.store_event(session_id, message_id, self.stop_event(session_id, message_id))
            except Exception as exc:
                log.warning("could not write a stop event: %s", exc)
                raise ApiError(500, "Failed to write stop event") from None
            return {"success": True, "message": "Generation stopped"}
        gen.stop_requested = True
        gen.cancel_event.set()
        assert gen.task is not None
        try:  # let the answer stream flush so the stop event is the log's last word
            await asyncio.wait_for(asyncio.shield(gen.task), self.settings.stop_wait_s)
        except TimeoutError:
            if not gen.stop_written:
                gen.stop_written = True
                await self._append_quietly(gen, self.stop_event(session_id, message_id))
        except Exception:
            pass  # the generation's own failure is already in the log
        return {"success": True, "message": "Generation stopped"}
