"""The chat server's life: at startup it finishes what dead servers left in flight (crash
recovery, :mod:`rag_lab.stream.recovery`) and starts the maintenance loop (heartbeats of this
server's in-flight records, turns settled once the store is back, memory bounded, orphans swept);
at shutdown it cancels what still runs. :class:`ServiceLifecycle` is one of the parts of
:class:`~rag_lab.stream.server_service.StreamService`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rag_lab.stream.server_generate import GenerationRunner

#: the server's logger name, unchanged by the split into modules (log filters keep working)
log = logging.getLogger("rag_lab.stream.server")


def _warm_imports() -> None:
    """Import what the first request would otherwise import on the event loop (the openai
    client's resources take seconds cold, during which no stream, stop or health is served)."""
    import importlib

    for name in ("openai.resources.chat.completions", "openai.resources.embeddings"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


class ServiceLifecycle(GenerationRunner):
    """Startup, maintenance and shutdown."""

    async def startup(self) -> None:
        """Finish what dead servers left in flight, then keep this server's records fresh."""
        from rag_lab.stream.recovery import LIVE_INSTANCES

        LIVE_INSTANCES.add(self.instance)
        await asyncio.to_thread(_warm_imports)
        await self.recover()
        self._maintenance = asyncio.get_running_loop().create_task(self._maintain(), name="stream-maintenance")

    async def recover(self) -> int:
        from rag_lab.stream.recovery import recover_orphans

        try:
            return await asyncio.to_thread(recover_orphans, self.manager, self.sessions, self.settings.orphan_after_s)
        except Exception as exc:
            log.warning("crash recovery failed (retrying later): %s", exc)
            return 0

    async def _maintain(self) -> None:
        sweep_every = max(1, int(5 / max(self.settings.heartbeat_s, 0.01)))
        tick = 0
        while True:
            await asyncio.sleep(self.settings.heartbeat_s)
            tick += 1
            running = {k: (g.partial, list(g.references)) for k, g in self.generations.items() if not g.finished()}
            try:
                if running or self.unsettled:
                    await asyncio.to_thread(self.sessions.heartbeat_generations, self.instance, running)
            except Exception as exc:
                log.warning("could not refresh the in-flight records: %s", exc)
            for gen in list(self.unsettled.values()):
                if await self._settle(gen):
                    del self.unsettled[(gen.session_id, gen.message_id)]
            # bounded memory while idle too: finished generations and expired in-process logs go
            self._forget_finished()
            expire = getattr(self.manager, "expire", None)
            if expire is not None:
                expire()
            if tick % sweep_every == 0:  # orphans of other hosts / hung processes
                await self.recover()

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel what is still running (server exit) and wait a little for it to wind down."""
        from rag_lab.stream.recovery import LIVE_INSTANCES

        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        running = [g for g in self.generations.values() if g.task is not None and not g.task.done()]
        for g in running:
            g.cancel_event.set()
        if running:
            await asyncio.wait([g.task for g in running if g.task is not None], timeout=timeout)
        if self.pipeline is not None:
            await asyncio.to_thread(self.pipeline.close, timeout)
        LIVE_INSTANCES.discard(self.instance)
