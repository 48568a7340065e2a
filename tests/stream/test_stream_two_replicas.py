"""Two ``rag-lab serve`` replicas sharing their state (issue 27, "a team deployment"): a
PostgreSQL store (KBs, documents, chunks, sessions, messages, generations in flight), Redis
streams and a Milvus engine (Milvus Lite's gRPC server), each replica with its own workspace
folder (caches), everything on loopback.

A question asked on replica A is resumed and stopped on replica B; the session's history is the
same on both, and the stop is final: A stores no answer delta after it, and the answer saved is
the one a reader up to the stop saw. B also answers a question of its own from the KB that only the store holds for it
(it has never ingested anything: it searches the shared Milvus and hydrates the hits from the
shared store).

The replicas are real processes (``benchmarks/replicas.py``); the chat model is the loopback
fake OpenAI server, streaming one word every 50 ms so that the answer is still running when B
stops it (nothing here asserts a time: the delays only make the stream long enough to cut).
"""

from __future__ import annotations

import itertools
import os
import time

import httpx
import pytest

from benchmarks.replicas import MilvusLiteServer, ServeReplica, start_all, write_config
from benchmarks.stream_reliability import free_port, iter_frames
from rag_lab.stream.manager import answer_text
from rag_lab.stream.redis_manager import RedisStreamManager
from tests.models.fake_openai import FakeOpenAIServer, Reply

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

Q = "When was the Brightwater lighthouse built?"
KEY = "alice-team-key-0123456789abcdef"
KEYS = {KEY: {"user": "alice", "tenant": 1}}
AUTH = {"Authorization": f"Bearer {KEY}"}
WORDS = [f"Word{i} " for i in range(400)]


def _history(client: httpx.Client, url: str, session_id: str, count: int = 2, wait_s: float = 20.0) -> list[dict]:
    """The session's messages on ``url`` once it holds ``count`` of them, all completed (the last
    answer's writer is done: the assistant message is saved after the stream's last frame)."""
    deadline = time.monotonic() + wait_s
    while True:
        r = client.get(f"{url}/sessions/{session_id}")
        assert r.status_code == 200, r.text
        messages = r.json()["data"]["messages"]
        if len(messages) >= count and all(m["is_completed"] for m in messages) or time.monotonic() > deadline:
            return messages
        time.sleep(0.1)


@pytest.fixture
def milvus(tmp_path):
    if os.environ.get("RAG_LAB_REQUIRE_EXTRAS") or os.environ.get("CI"):
        import milvus_lite  # noqa: F401  (make test / CI install the extra: never skip there)
    else:
        pytest.importorskip("milvus_lite", reason="Milvus Lite comes with the 'milvus' extra")
    server = MilvusLiteServer(tmp_path / "milvus", free_port()).start()
    yield {"type": "milvus", "uri": server.uri, "collection_prefix": "team"}
    server.stop()


def test_ask_on_replica_a_resume_and_stop_on_replica_b_history_on_both(tmp_path, pg_dsn, redis_url, milvus, docs_dir):
    from rag_lab.lab import Lab

    ingest = Lab.from_config({"store": {"type": "postgres", "dsn": pg_dsn}, "engine": milvus}, workspace=tmp_path / "a")
    ingest.ingest(docs_dir, kb="demo", progress=False)  # into the shared store and the shared Milvus
    ingest.engines.close()
    ingest.workspace.close()
    ingest.sessions.close()

    calls = itertools.count()
    with FakeOpenAIServer() as model:
        model.piece_delay = 0.05
        # the first streamed answer is long (it is stopped); the later ones are short
        model.stream_reply = lambda req: Reply.chat(WORDS if next(calls) == 0 else ["Built ", "in ", "1874."])
        chat = {"type": "openai", "model": "paced", "base_url": model.base_url, "max_retries": 0, "timeout": 30}
        a = ServeReplica(
            write_config(tmp_path / "a.yaml", tmp_path / "a", pg_dsn, api_keys=KEYS, chat=chat, engine=milvus),
            free_port(),
            redis_url,
        )
        b = ServeReplica(
            write_config(tmp_path / "b.yaml", tmp_path / "b", pg_dsn, api_keys=KEYS, chat=chat, engine=milvus),
            free_port(),
            redis_url,
        )
        start_all([a, b])
        try:
            for replica in (a, b):  # the banner names the shared store, its password left out
                assert "store: postgres postgresql://postgres@127.0.0.1:" in replica.stderr()
            with httpx.Client(timeout=30, headers=AUTH) as c:
                created = c.post(f"{a.url}/sessions", json={"title": "team"})  # on A, used on both
                assert created.status_code == 201, created.text
                sid = created.json()["data"]["id"]
                with c.stream("POST", f"{a.url}/knowledge-chat/{sid}", json={"query": Q, "kb": "demo"}) as r:
                    assert r.status_code == 200, r.read()
                    mid = r.headers["x-message-id"]
                    on_a = []
                    for f in iter_frames(r.iter_lines()):
                        on_a.append(f)
                        if sum(x.type == "answer" for x in on_a) >= 3:
                            break  # the reader on A leaves; the generation goes on (it belongs to A)
                on_b = []
                stop_reply = None
                with c.stream("GET", f"{b.url}/sessions/continue-stream/{sid}", params={"message_id": mid}) as r:
                    assert r.status_code == 200
                    for f in iter_frames(r.iter_lines()):
                        on_b.append(f)
                        if stop_reply is None and sum(x.type == "answer" for x in on_b) >= 8:
                            stop_reply = c.post(f"{b.url}/sessions/{sid}/stop", json={"message_id": mid})
                assert stop_reply is not None and stop_reply.json() == {
                    "success": True,
                    "message": "Generation stopped",
                }
                assert on_b[-1].type == "stop"  # B's reader ends on the stop that A's generation obeyed
                resumed = "".join(f.data["content"] for f in on_b if f.type == "answer")
                seen_on_a = "".join(f.data["content"] for f in on_a if f.type == "answer")
                assert resumed.startswith(seen_on_a) and resumed.startswith("Word0 Word1 Word2 ")

                history_a = _history(c, a.url, sid)
                history_b = _history(c, b.url, sid)
                assert history_a == history_b
                assert [m["role"] for m in history_a] == ["user", "assistant"]
                assert history_a[0]["content"] == Q
                saved = history_a[1]["content"]
                assert saved.startswith("Word0 Word1 ") and "Word399" not in saved  # the partial answer, kept
                # stop is final across replicas: A appended no answer delta after B's stop, and the
                # answer saved is exactly what a reader up to the stop saw
                reader = RedisStreamManager(url=redis_url)
                log, _ = reader.get_events(sid, mid, 0)
                reader.close()
                types = [e.type for e in log]
                assert types.count("stop") == 1 and "answer" not in types[types.index("stop") :]
                assert saved == resumed == answer_text(log[: types.index("stop")])
                assert history_a[1]["id"] == mid or history_a[1]["request_id"]

                # B answers a question of its own from the shared store (hits hydrated from it)
                with c.stream("POST", f"{b.url}/knowledge-chat/{sid}", json={"query": Q, "kb": "demo"}) as r:
                    frames = list(iter_frames(r.iter_lines()))
                refs = [f for f in frames if f.type == "references"]
                assert refs and any(
                    ref["knowledge_title"] == "The Brightwater Lighthouse"
                    for ref in refs[-1].data["knowledge_references"]
                )
                assert frames[-1].type == "complete"
                # B never built an index of its own: it searched Milvus and read the rows from PostgreSQL
                assert not (tmp_path / "b" / "indexes").exists() and not (tmp_path / "b" / "store.sqlite").exists()
                history_a = _history(c, a.url, sid, count=4)
                assert [m["role"] for m in history_a] == ["user", "assistant", "user", "assistant"]
                assert history_a == _history(c, b.url, sid, count=4)
                assert history_a[3]["content"].startswith("Built in 1874.")
                # the sessions list is the same on both replicas
                lists = [c.get(f"{x.url}/sessions").json()["data"] for x in (a, b)]
                assert lists[0] == lists[1] and [s["id"] for s in lists[0]] == [sid]
        finally:
            for name, replica in (("A", a), ("B", b)):
                print(f"-- replica {name} stderr:\n{replica.stderr()}")  # shown when the test fails
                replica.stop()
