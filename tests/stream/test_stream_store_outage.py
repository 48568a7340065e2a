"""A store outage longer than the store's window: the turn fails once, and is saved when the
store is back. The chat server runs in-process over a PostgreSQL store of this test's own (it is
stopped and started) with ``outage_s: 0``, so the save of a finished answer fails; the stream
ends with the error, and once PostgreSQL is back the server's maintenance saves the answer it had
as the assistant message (completed, ``extra.error`` naming the cause) and clears the in-flight
record. The answer is held at the model until the store is down, so nothing here depends on
timing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from benchmarks.stream_reliability import ServerThread, iter_frames
from tests.stream.conftest import wait_until

pytestmark = pytest.mark.postgres


class HeldChatModel:
    """A real chat model whose answer stream starts once :attr:`go` is set."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.go = threading.Event()
        self.waiting = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def chat(self, messages: Any, options: Any = None) -> Any:
        return await self.inner.chat(messages, options)

    async def chat_stream(self, messages: Any, options: Any = None) -> AsyncIterator[Any]:
        self.waiting.set()
        await asyncio.to_thread(self.go.wait, 60)
        async for chunk in self.inner.chat_stream(messages, options):
            yield chunk


def test_a_turn_whose_save_fails_is_saved_with_its_cause_once_the_store_is_back(tmp_path, own_pg, docs_dir):
    from rag_lab.lab import Lab
    from rag_lab.lab.lab import CHAT_MODEL_ID
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.server import StreamServerSettings, create_app

    dsn = own_pg.new_database("outage")
    lab = Lab.from_config({"store": {"type": "postgres", "dsn": dsn, "outage_s": 0}}, workspace=tmp_path / "ws")
    lab.ingest(docs_dir, kb="demo", progress=False)
    held = HeldChatModel(lab.services.chat_models[CHAT_MODEL_ID])
    lab.services.chat_models[CHAT_MODEL_ID] = held
    app = create_app(lab, manager=MemoryStreamManager(), settings=StreamServerSettings(heartbeat_s=0.1))
    with ServerThread(app) as srv, httpx.Client(timeout=60) as client:
        with client.stream(
            "POST", f"{srv.url}/knowledge-chat/s1", json={"query": "When was the lighthouse built?", "kb": "demo"}
        ) as r:
            assert r.status_code == 200
            mid = r.headers["x-message-id"]
            frames = iter_frames(r.iter_lines())
            assert held.waiting.wait(60)  # the answer is about to be generated
            own_pg.pause()
            held.go.set()  # it streams; saving it then finds the store down (no window)
            got = list(frames)
        types = [f.type for f in got]
        assert "complete" not in types and types[-1] == "error"  # failed once, with the cause
        answer = "".join(f.data["content"] for f in got if f.type == "answer")
        assert "1874" in answer
        assert "Connection refused" in got[-1].data["content"]
        own_pg.resume()
        assert wait_until(lambda: not srv.service.unsettled, timeout=60)
        saved = lab.sessions.find_message("s1", mid)
        assert saved is not None and saved.is_completed and saved.content == answer
        assert "Connection refused" in saved.extra["error"]
        assert [m.role for m in lab.sessions.list_messages("s1")] == ["user", "assistant"]
        assert lab.sessions.list_generations() == []
    lab.workspace.close()
    lab.sessions.close()
