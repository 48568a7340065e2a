"""A PostgreSQL restart is waited out by the stores: while the server is down (connections
refused), reads, transactions and lone writes of the knowledge and session stores wait for it
(with backoff, up to ``outage_s``) and then run once; with no window the same statement fails with
the refusal; errors no wait cures are not waited for.

The server is this module's own (it is stopped and started), on a free loopback port."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.knowledge.pg_outage import is_transient, outage_window
from rag_lab.knowledge.sqldb import PgConnection
from rag_lab.knowledge.store import KnowledgeStore, StoreError
from rag_lab.knowledge.store_config import StoreConfig
from rag_lab.session.sqlite_store import SQLiteSessionStore

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def own_pg():
    from tests.pg_server import PostgresServer, need_postgres

    need_postgres()
    srv = PostgresServer().start()
    yield srv
    srv.stop()


def _resume_later(srv, after_s: float) -> threading.Thread:
    """Start the paused server again ``after_s`` seconds from now, in the background."""
    timer = threading.Timer(after_s, srv.resume)
    timer.start()
    return timer


def test_reads_transactions_and_lone_writes_wait_for_a_restarting_server(own_pg):
    dsn = own_pg.new_schema()
    store, sessions = KnowledgeStore(dsn), SQLiteSessionStore(dsn)
    try:
        store.create_kb(KnowledgeBase(id="kb1", name="A"))
        sid = sessions.create_session("alice").id
        mid = sessions.insert_message(sid, "assistant", "", "r1")
        sessions.begin_generation(sid, "r1", user_id="alice", query="q")

        own_pg.pause()  # every connection above is now dead and new ones are refused
        timer = _resume_later(own_pg, 1.0)
        try:
            assert store.get_kb("kb1").name == "A"  # a read: waits, reconnects, runs
            store.create_kb(KnowledgeBase(id="kb2", name="B"))  # a transaction whose BEGIN waited
        finally:
            timer.join()
        own_pg.pause()
        timer = _resume_later(own_pg, 1.0)
        try:
            # lone writes (autocommit UPDATE / DELETE): nothing was sent on the dead connection
            sessions.finish_message(sid, mid, content="the answer")
            sessions.end_generation(sid, "r1")
            sessions.add_message(sid, "user", "and then?", "r2")  # BEGIN … COMMIT
        finally:
            timer.join()
        assert [k.id for k in store.list_kbs()] == ["kb1", "kb2"]
        got = [(m.role, m.content) for m in sessions.list_messages(sid)]
        assert got == [("assistant", "the answer"), ("user", "and then?")]
        assert sessions.get_message(sid, mid).is_completed
        assert sessions.list_generations() == []
    finally:
        store.close()
        sessions.close()


def test_without_a_window_the_refusal_is_raised(own_pg):
    dsn = own_pg.new_schema()
    store, sessions = KnowledgeStore(dsn, outage_s=0), SQLiteSessionStore(dsn, outage_s=0)
    try:
        store.create_kb(KnowledgeBase(id="kb1", name="A"))
        sid = sessions.create_session("alice").id
        own_pg.pause()
        try:
            with pytest.raises(sqlite3.OperationalError, match="Connection refused"):
                store.get_kb("kb1")
            with pytest.raises(sqlite3.OperationalError, match="Connection refused"):
                sessions.add_message(sid, "user", "lost", "r1")
        finally:
            own_pg.resume()
        assert store.get_kb("kb1").name == "A"  # the next statement reconnects
        assert sessions.list_messages(sid) == []
    finally:
        store.close()
        sessions.close()


def test_errors_that_no_wait_cures_are_raised_at_once(own_pg):
    # a database that does not exist: not a restart, so not waited for even with a window
    with pytest.raises(sqlite3.OperationalError, match='database "nowhere" does not exist'):
        PgConnection(own_pg.dsn("nowhere"), outage_s=3600, wait=True)
    with pytest.raises(StoreError, match="cannot connect"):
        KnowledgeStore(own_pg.dsn("nowhere"))


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        ('connection to server at "127.0.0.1", port 5 failed: Connection refused', True),
        ("FATAL:  the database system is starting up", True),
        ("server closed the connection unexpectedly", True),
        ('FATAL:  password authentication failed for user "rag"', False),
        ('FATAL:  database "x" does not exist', False),
    ],
)
def test_which_errors_are_waited_for(message, transient):
    assert is_transient(Exception(message)) is transient


def test_the_window_comes_from_the_config_or_the_environment():
    assert outage_window(None, {}) == 30.0
    assert outage_window(None, {"RAG_LAB_STORE_OUTAGE_S": "5"}) == 5.0
    assert outage_window(2, {"RAG_LAB_STORE_OUTAGE_S": "5"}) == 2.0
    with pytest.raises(
        ValueError, match=r"\$RAG_LAB_STORE_OUTAGE_S: expected a number of seconds in \[0, 3600\], got 'soon'"
    ):
        outage_window(None, {"RAG_LAB_STORE_OUTAGE_S": "soon"})
    cfg = StoreConfig.from_config({"type": "postgres", "dsn": "postgresql://h/db", "outage_s": 12}, "lab.yaml", {})
    assert cfg.outage_s == 12.0
    with pytest.raises(
        ValueError, match=r"lab.yaml: store.outage_s: expected a number of seconds in \[0, 3600\], got -1"
    ):
        StoreConfig.from_config({"type": "postgres", "dsn": "postgresql://h/db", "outage_s": -1}, "lab.yaml", {})
