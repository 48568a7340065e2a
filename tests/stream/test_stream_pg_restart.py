"""PostgreSQL restarts under two ``rag-lab serve`` replicas (a shared store, Redis streams): asks
held at the model before retrieval and asks held in generation when the store goes down all
complete once it is back; the assistant message of each is in the session as soon as its stream
says ``complete`` (read on the other replica); no in-flight record is left behind.

The server is this test's own PostgreSQL (it is stopped and started), on a free loopback port;
the chat model is the loopback fake OpenAI server, which holds the asks' requests until the store
is down (``benchmarks/replica_faults.py``), so where each ask is when the store goes down does not
depend on timing.
"""

from __future__ import annotations

import pytest

from benchmarks.replica_faults import GatedModel, in_flight_rows, pg_restart_round, start_team
from tests.models.fake_openai import FakeOpenAIServer

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

KEY = "bob-team-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
WORDS = [f"Part{i} " for i in range(12)]
ANSWER = "".join(WORDS)


def test_asks_in_retrieval_and_in_generation_ride_out_a_postgres_restart(tmp_path, own_pg, redis_url, docs_dir):
    dsn = own_pg.new_database("team")
    with FakeOpenAIServer() as server:
        model = GatedModel(server, WORDS)
        chat = {"type": "openai", "model": "gated", "base_url": server.base_url, "max_retries": 0, "timeout": 60}
        keys = {KEY: {"user": "bob", "tenant": 1}}  # the tenant that owns what a Lab ingests
        replicas = start_team(tmp_path, dsn, redis_url, docs_dir, chat, keys)
        try:
            retrieving, generating, _ = pg_restart_round(
                [r.url for r in replicas],
                AUTH,
                model,
                own_pg,
                kb="demo",
                question="When was the Brightwater lighthouse built?",
            )
            for ask in retrieving + generating:
                assert ask.error == "", ask.error
                assert ask.last == "complete", [f.type for f in ask.frames]
                assert ask.answer == ANSWER
                assert [f.type for f in ask.frames].count("error") == 0
                # read on the other replica right after complete: the answer is there, completed
                got = [(m["role"], m["content"], m["is_completed"]) for m in ask.messages_after]
                assert got[1:] == [("assistant", ANSWER, True)], got
                assert got[0][0] == "user"
            assert {a.replica for a in retrieving} == {r.url for r in replicas}  # both replicas took part
            assert in_flight_rows(dsn) == []
            # the replicas did meet the outage (their stores waited for the server)
            assert any("is unreachable" in r.stderr() for r in replicas)
        finally:
            for name, replica in zip("AB", replicas, strict=True):
                print(f"-- replica {name} stderr:\n{replica.stderr()}")
                replica.stop()
