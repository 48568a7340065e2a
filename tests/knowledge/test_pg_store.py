"""The knowledge store on PostgreSQL where it differs from one SQLite file: several processes'
connections (two store objects here) see each other's writes through the database's change
counter, the schema is created once when two stores open an empty database at once, a server
that cannot be reached is an error naming the URL without its password, and a workspace over a
shared store serves what another workspace (another replica's folder) ingested."""

from __future__ import annotations

import threading

import pytest

from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.knowledge.sqldb import pg_table_sql, redact, to_pg
from rag_lab.knowledge.store import KnowledgeStore, StoreError

pytestmark = pytest.mark.postgres


def test_two_stores_see_each_others_writes_and_the_change_token_moves(pg_dsn):
    a, b = KnowledgeStore(pg_dsn), KnowledgeStore(pg_dsn)
    try:
        assert a.shared and b.shared and a.path is None
        before = b.change_token()
        a.create_kb(KnowledgeBase(id="kb1", name="Alpha"))
        after = b.change_token()
        assert after[0] == before[0] == 0  # b wrote nothing itself...
        assert after[1] == before[1] + 1  # ...and the database's counter moved by a's one commit
        assert b.get_kb("kb1").name == "Alpha"
        b.add_knowledge(Knowledge(id="d1", knowledge_base_id="kb1", title="T"))
        b.add_chunks([Chunk(id="kb1:c0", knowledge_id="d1", knowledge_base_id="kb1", content="x")])
        table = a.kb_rows.chunks("kb1")
        assert table is not None and set(table.rows) == {"kb1:c0"}
        b.set_chunks_enabled(["kb1:c0"], False)  # b's write drops a's held rows
        again = a.kb_rows.chunks("kb1")
        assert again is not table and again is not None and again.get("kb1:c0").is_enabled is False
        assert a.change_token() == (1, before[1] + 4) and b.change_token() == (3, before[1] + 4)
    finally:
        a.close()
        b.close()


def test_two_stores_opening_an_empty_database_at_once_create_the_schema_once(pg_dsn):
    stores: list[KnowledgeStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(KnowledgeStore(pg_dsn))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 4
    stores[0].create_kb(KnowledgeBase(id="kb1", name="A"))
    assert [k.id for k in stores[3].list_kbs()] == ["kb1"]
    for s in stores:
        s.close()


def test_unreachable_server_names_the_url_without_its_password(pg_server):
    url = f"postgresql://someone:secret@127.0.0.1:{pg_server.port + 1 if pg_server.port < 65535 else 1}/x"
    with pytest.raises(StoreError, match=r"someone:\*\*\*@127\.0\.0\.1:\d+/x: cannot connect") as err:
        KnowledgeStore(url)
    assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM t WHERE a = ? AND b LIKE 'x%'", "SELECT * FROM t WHERE a = %s AND b LIKE 'x%%'"),
        (
            "CREATE TABLE t (id TEXT, n INTEGER, at REAL, note TEXT NOT NULL DEFAULT '')",
            'CREATE TABLE t (id TEXT COLLATE "C", n BIGINT, at DOUBLE PRECISION, note TEXT COLLATE "C" NOT NULL DEFAULT \'\')',
        ),
    ],
)
def test_statements_are_translated_for_postgres(sql, expected):
    assert to_pg(sql) == expected


def test_only_table_definitions_get_postgres_types():
    assert to_pg("UPDATE t SET n = ? WHERE id = ?") == "UPDATE t SET n = %s WHERE id = %s"
    assert pg_table_sql("CREATE TABLE x (a INTEGER)") == "CREATE TABLE x (a BIGINT)"
    assert redact("postgresql://u:pw@h:5/db?x=1") == "postgresql://u:***@h:5/db?x=1"
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"


def test_text_sorts_by_code_point_as_on_sqlite(pg_dsn, tmp_path):
    ids = ["b", "B", "a", "_x", "é", "Z", "a-1", "a_1", "10", "9"]
    orders = []
    for where in (tmp_path / "s.sqlite", pg_dsn):
        with KnowledgeStore(where) as s:
            s.create_kb(KnowledgeBase(id="kb", name="kb"))
            s.add_chunks([Chunk(id=i, knowledge_id="d", knowledge_base_id="kb", content=i) for i in ids])
            orders.append([c.id for c in s.list_chunks("kb")])
    assert orders[0] == orders[1] == sorted(ids)


def test_a_workspace_serves_what_another_workspace_ingested_into_the_shared_store(pg_dsn, tmp_path, embedder):
    """Two replicas' folders over one PostgreSQL store: B's indexes are built from the store when
    opened, and rebuilt from it when A writes again (the change token moved)."""
    from rag_lab.knowledge.workspace import Workspace

    a, b = Workspace(tmp_path / "a", store=pg_dsn), Workspace(tmp_path / "b", store=pg_dsn)
    try:
        kb = a.create_kb("shared", embedder, chunk_size=200, chunk_overlap=0)
        a.ingest_documents(
            kb,
            [{"id": "d1", "title": "Lighthouse", "text": "The lighthouse was built in 1874."}],
            embedder,
            progress=False,
        )
        b.embedder_for = lambda kb: embedder
        assert b.keyword_index("shared").chunk_ids() == a.keyword_index("shared").chunk_ids()
        assert len(b.vector_index("shared")) == 1
        a.ingest_documents(
            kb, [{"id": "d2", "title": "Bread", "text": "Sourdough rises with wild yeast."}], embedder, progress=False
        )
        assert sorted(b.keyword_index("shared").chunk_ids()) == sorted(a.store.searchable_chunk_ids(kb.id))
        assert len(b.keyword_index("shared").chunk_ids()) == 2 and len(b.vector_index("shared")) == 2
    finally:
        a.close()
        b.close()


def test_a_writer_over_the_shared_store_saves_indexes_equal_to_the_store(pg_dsn, tmp_path, embedder):
    """Re-ingesting a changed document (its old chunks deleted from the store, then from the
    indexes the writer holds) saves index files that hold exactly the store's chunks: the
    writer's cached indexes are not swapped for reloaded ones under it when its own writes move
    the change token."""
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.retrieval.vector_index import VectorIndex

    long_text = " ".join(f"Sentence {i} about the lighthouse keeper and the lamp." for i in range(40))
    with Workspace(tmp_path / "a", store=pg_dsn) as ws:
        kb = ws.create_kb("shared", embedder, chunk_size=120, chunk_overlap=0)
        ws.ingest_documents(kb, [{"id": "d1", "title": "Long", "text": long_text}], embedder, progress=False)
        before = ws.store.searchable_chunk_ids(kb.id)
        ws.ingest_documents(kb, [{"id": "d1", "title": "Short", "text": "The lamp was lit."}], embedder, progress=False)
        after = ws.store.searchable_chunk_ids(kb.id)
        assert len(before) > 10 and len(after) == 1
        saved_vectors = VectorIndex.load(ws.index_dir(kb.id), kb.embedding_dim).chunk_ids()
        saved_keywords = KeywordIndex.load(ws.index_dir(kb.id) / "bm25").chunk_ids()
        assert set(saved_vectors) == after and set(saved_keywords) == after


def test_the_stage_cache_versions_a_kb_of_a_postgres_store_and_sees_other_writers(pg_dsn, tmp_path):
    """``KbVersioner`` (the eval stage cache's KB versions) over a PostgreSQL store: the same rows
    give the version a SQLite store gives, and another connection's write changes it."""
    from rag_lab.eval.cache.keys import KbVersioner

    rows = (KnowledgeBase(id="kb1", name="A", created_at=1.0), Knowledge(id="d1", knowledge_base_id="kb1", title="T"))
    versions = []
    for where in (tmp_path / "s.sqlite", pg_dsn):
        with KnowledgeStore(where) as s:
            s.create_kb(rows[0])
            s.add_knowledge(rows[1])
            s.add_chunks([Chunk(id="kb1:c0", knowledge_id="d1", knowledge_base_id="kb1", content="x")])
            versions.append(KbVersioner(s).version("kb1"))
    assert versions[0] == versions[1]
    with KnowledgeStore(pg_dsn) as reader, KnowledgeStore(pg_dsn) as writer:
        versioner = KbVersioner(reader)
        assert versioner.version("kb1") == versions[1]
        writer.add_chunks([Chunk(id="kb1:c1", knowledge_id="d1", knowledge_base_id="kb1", content="y")])
        assert versioner.version("kb1") != versions[1]


def test_connections_dropped_by_the_server_are_opened_again(pg_dsn, pg_server):
    """A PostgreSQL restart (here: every other connection terminated) costs nothing but the
    reconnect: the next read and write of both stores work; the session store too."""
    import psycopg

    from rag_lab.session.sqlite_store import SQLiteSessionStore

    store, sessions = KnowledgeStore(pg_dsn), SQLiteSessionStore(pg_dsn)
    try:
        store.create_kb(KnowledgeBase(id="kb1", name="A"))
        sid = sessions.create_session("alice").id
        with psycopg.connect(pg_server.dsn("rag_lab"), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()")
        assert store.get_kb("kb1").name == "A"
        store.create_kb(KnowledgeBase(id="kb2", name="B"))
        sessions.add_message(sid, "user", "still here?", "r1")
        assert [m.content for m in sessions.list_messages(sid)] == ["still here?"]
        assert [k.id for k in KnowledgeStore(pg_dsn).list_kbs()] == ["kb1", "kb2"]
    finally:
        store.close()
        sessions.close()
