from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.knowledge.store import KnowledgeStore, StoreError


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def location(request, tmp_path):
    """A store's file, or a PostgreSQL store's URL (two stores opened on it are two connections)."""
    return tmp_path / "s.sqlite" if request.param == "sqlite" else request.getfixturevalue("pg_dsn")


def _kb(i: str, name: str | None = None) -> KnowledgeBase:
    return KnowledgeBase(
        id=i,
        name=name or f"name-{i}",
        embedding_model_key="m|u",
        embedding_dim=8,
        metadata={"parent_chunk_size": 0, "nested": {"a": [1, 2]}},
    )


def _chunk(cid: str, kid: str, kb: str, idx: int = 0, **kw) -> Chunk:
    return Chunk(id=cid, knowledge_id=kid, knowledge_base_id=kb, content=f"content of {cid}", chunk_index=idx, **kw)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    """The store on each backend: the PostgreSQL one is held to the same behaviour."""
    s = KnowledgeStore(tmp_path / "s.sqlite" if request.param == "sqlite" else request.getfixturevalue("pg_dsn"))
    yield s
    s.close()


def test_kb_crud_and_round_trip(store):
    kb = store.create_kb(_kb("kb1", "Alpha"))
    assert kb.created_at > 0
    got = store.get_kb("kb1")
    assert got == kb  # every field, JSON metadata and bools included
    assert store.get_kb_by_name("Alpha") == kb
    assert store.get_kb("nope") is None and store.get_kb_by_name("nope") is None
    store.create_kb(_kb("kb2", "Beta"))
    assert [k.id for k in store.list_kbs()] == ["kb1", "kb2"]
    assert set(store.get_kbs(["kb2", "missing", "kb1"])) == {"kb1", "kb2"}
    with pytest.raises(StoreError, match="(?i)unique"):
        store.create_kb(_kb("kb3", "Alpha"))  # duplicate name
    kb.description = "changed"
    store.update_kb(kb)
    assert store.get_kb("kb1").description == "changed"


def test_documents_and_chunks(store):
    store.create_kb(_kb("kb1"))
    doc = Knowledge(
        id="d1",
        knowledge_base_id="kb1",
        title="T",
        metadata={"lang": "en"},
        custom_metadata={"x": [1]},
        content_hash="h",
    )
    store.add_knowledge(doc)
    chunks = [
        _chunk("kb1:d1#c0", "d1", "kb1", 0, metadata={"generated_questions": [{"id": "q", "question": "?"}]}),
        _chunk("kb1:d1#c1", "d1", "kb1", 1, is_enabled=False),
    ]
    store.add_chunks(chunks)
    assert store.get_document("kb1", "d1") == doc
    assert store.get_knowledge(["d1", "zz"]) == {"d1": doc}
    got = store.get_chunks(["kb1:d1#c1", "missing", "kb1:d1#c0"])
    assert set(got) == {"kb1:d1#c0", "kb1:d1#c1"}
    assert got["kb1:d1#c0"] == chunks[0] and got["kb1:d1#c1"].is_enabled is False
    assert got["kb1:d1#c1"].metadata == {} and got["kb1:d1#c1"].image_info == ""  # empty JSON and text
    cols = store.get_chunk_columns(["kb1:d1#c1", "missing", "kb1:d1#c0"], ("knowledge_id", "is_enabled", "content"))
    assert cols == {"kb1:d1#c0": ("d1", 1, "content of kb1:d1#c0"), "kb1:d1#c1": ("d1", 0, "content of kb1:d1#c1")}
    with pytest.raises(StoreError, match="not plain chunk columns: metadata, nope"):
        store.get_chunk_columns(["kb1:d1#c0"], ("content", "metadata", "nope"))
    assert [c.id for c in store.list_chunks("kb1")] == ["kb1:d1#c0", "kb1:d1#c1"]
    assert store.searchable_chunk_ids("kb1") == {"kb1:d1#c0"}
    assert store.has_unsearchable_indexed_chunks("kb1") is True
    store.set_chunks_enabled(["kb1:d1#c1"], True)
    assert store.has_unsearchable_indexed_chunks("kb1") is False
    assert store.delete_knowledge("kb1", "d1") == ["kb1:d1#c0", "kb1:d1#c1"]
    assert store.get_chunks(["kb1:d1#c0"]) == {} and store.get_document("kb1", "d1") is None


def test_same_document_id_in_two_kbs(store):
    store.create_kb(_kb("kbA"))
    store.create_kb(_kb("kbB"))
    store.add_knowledge(
        [
            Knowledge(id="doc", knowledge_base_id="kbA", title="in A"),
            Knowledge(id="doc", knowledge_base_id="kbB", title="in B"),
        ]
    )
    assert store.get_knowledge(["doc"], kb_ids=["kbB"])["doc"].title == "in B"
    assert store.get_knowledge(["doc"], kb_ids=["kbA"])["doc"].title == "in A"
    assert store.get_knowledge(["doc"])["doc"].title == "in A"  # earliest KB wins when ambiguous
    assert store.get_knowledge(["doc"], kb_ids=[]) == {}


def test_searchable_filters(store):
    store.create_kb(_kb("kb"))
    store.add_chunks(
        [
            _chunk("c1", "d1", "kb", tag_id="t1"),
            _chunk("c2", "d1", "kb", tag_id="t2"),
            _chunk("c3", "d2", "kb", tag_id="t1"),
            _chunk("p1", "d2", "kb", chunk_type="parent_text"),
            _chunk("c4", "d2", "kb", index_status="processing"),
            _chunk("c5", "d2", "kb", chunk_type="faq"),
        ]
    )
    assert store.searchable_chunk_ids("kb") == {"c1", "c2", "c3", "c5"}
    assert store.searchable_chunk_ids("kb", knowledge_ids=["d1"]) == {"c1", "c2"}
    assert store.searchable_chunk_ids("kb", tag_ids=["t1"]) == {"c1", "c3"}
    assert store.searchable_chunk_ids("kb", knowledge_ids=["d1"], tag_ids=["t1"]) == {"c1"}  # AND
    # large filters take the Python path and agree with SQL
    many = ["d1"] + [f"x{i}" for i in range(1000)]
    assert store.searchable_chunk_ids("kb", knowledge_ids=many, tag_ids=["t2"]) == {"c2"}


def test_batches_over_sqlite_variable_limit(store):
    store.create_kb(_kb("kb"))
    store.add_chunks([_chunk(f"c{i:05d}", "d", "kb", i) for i in range(2500)])
    ids = [f"c{i:05d}" for i in range(0, 2500, 1)]
    assert len(store.get_chunks(ids)) == 2500
    assert store.count_chunks("kb") == 2500


def test_threads_and_reopen(location):
    path = location
    s = KnowledgeStore(path)
    s.create_kb(_kb("kb"))
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            s.add_chunks([_chunk(f"w{n}-{i}", f"d{n}", "kb", i) for i in range(50)])
            assert len(s.get_chunks([f"w{n}-{i}" for i in range(50)])) == 50
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    s.close()
    with KnowledgeStore(path) as s2:
        assert s2.count_chunks("kb") == 300
        assert s2.get_kb("kb").metadata == {"parent_chunk_size": 0, "nested": {"a": [1, 2]}}
    with pytest.raises(StoreError, match="closed"):
        s.get_kb("kb")


def test_not_a_database_names_path(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="bad.sqlite"):
        KnowledgeStore(bad)


_TEXT = st.text(max_size=20)


def _chunk_strategy():
    json_value = st.recursive(
        st.none() | st.booleans() | st.integers(-5, 5) | _TEXT, lambda inner: st.lists(inner, max_size=3), max_leaves=5
    )
    return st.builds(
        Chunk,
        id=st.just(""),  # set below: unique per example
        knowledge_id=st.sampled_from(["d1", "d2"]),
        knowledge_base_id=st.just("kb1"),
        content=_TEXT,
        chunk_index=st.integers(0, 9),
        chunk_type=st.sampled_from(["text", "faq", "image_ocr", "parent_text"]),
        start_at=st.integers(0, 100),
        end_at=st.integers(0, 100),
        parent_chunk_id=st.sampled_from(["", "p"]),
        is_enabled=st.booleans(),
        index_status=st.sampled_from(["indexed", "processing", "failed"]),
        image_info=_TEXT,
        metadata=st.dictionaries(_TEXT, json_value, max_size=3),
        content_revision=st.integers(0, 3),
        tag_id=_TEXT,
    )


def test_rows_read_back_equal_what_was_written(tmp_path):
    """Every getter decodes rows into the objects written (JSON fields, booleans, unicode), for
    random chunks and documents."""

    @settings(max_examples=30)
    @given(st.lists(_chunk_strategy(), min_size=1, max_size=6), st.dictionaries(_TEXT, _TEXT, max_size=3))
    def check(chunks, doc_meta):
        store = KnowledgeStore(tmp_path / f"s{len(list(tmp_path.iterdir()))}.db")
        for i, c in enumerate(chunks):
            c.id = f"kb1:c{i}"
        store.create_kb(_kb("kb1"))
        doc = Knowledge(
            id="d1", knowledge_base_id="kb1", title="T", metadata=doc_meta, custom_metadata={"k": [1]}, created_at=1.0
        )
        store.add_knowledge(doc)
        store.add_chunks(chunks)
        by_id = {c.id: c for c in chunks}
        assert store.get_chunks(list(by_id)) == by_id
        assert sorted(store.list_chunks("kb1"), key=lambda c: c.id) == sorted(chunks, key=lambda c: c.id)
        assert store.get_children(["p"]) == sorted(
            (c for c in chunks if c.parent_chunk_id == "p"), key=lambda c: (c.chunk_index, c.id)
        )
        assert store.get_knowledge(["d1"]) == {"d1": doc} and store.list_knowledge("kb1") == [doc]
        assert store.get_document("kb1", "d1") == doc
        # the whole KB's rows decode into the same objects, and give the same children
        whole, docs = store.kb_rows.chunks("kb1"), store.kb_rows.documents("kb1")
        assert whole is not None and docs is not None
        assert {cid: whole.get(cid) for cid in whole.rows} == by_id and docs.get("d1") == doc
        assert whole.get_children(["p", "", "x"]) == store.get_children(["p", "", "x"])
        assert whole.has_children() == any(c.parent_chunk_id for c in chunks)
        assert store.get_chunk_rows(list(by_id))[1] == whole.rows
        # a reader of some fields gives those fields of the decoded objects (any order, repeats)
        for names in (("metadata", "is_enabled", "id"), ("content",), tuple(whole.columns), ("id", "id")):
            read = whole.reader(names)
            for cid, row in whole.rows.items():
                assert read(row) == [getattr(by_id[cid], n) for n in names]
        read_doc = docs.reader(("custom_metadata", "metadata", "title"))
        assert read_doc(docs.rows["d1"]) == [doc.custom_metadata, doc.metadata, doc.title]
        store.close()

    check()


def test_kb_rows_are_read_once_per_store_state_within_their_budget(location):
    """One scan per table and store state; a write here or by another connection drops the rows
    (the next read sees it); a table over the budget is not held; an unknown table is an error."""
    store = KnowledgeStore(location)
    store.create_kb(_kb("kb1"))
    store.add_chunks([_chunk(f"kb1:c{i}", "d1", "kb1", i) for i in range(5)])
    scans: list[str] = []
    original = store.kb_table_rows
    store.kb_table_rows = lambda table, kb_id: scans.append(table) or original(table, kb_id)  # type: ignore[method-assign]
    rows = store.kb_rows
    first = rows.chunks("kb1")
    assert first is not None and len(first) == 5 and rows.chunks("kb1") is first and rows.held() == 5
    assert rows.documents("kb1") is not None and scans == ["chunks", "knowledge"]
    store.set_chunks_enabled(["kb1:c0"], False)  # this process' write
    again = rows.chunks("kb1")
    assert again is not first and again is not None and again.get("kb1:c0").is_enabled is False
    other = KnowledgeStore(location)  # another connection's commit (another process' on PostgreSQL)
    other.add_chunks([_chunk("kb1:c9", "d1", "kb1", 9)])
    other.close()
    assert "kb1:c9" in rows.chunks("kb1").rows and scans == ["chunks", "knowledge", "chunks", "chunks"]
    rows.max_rows = 3
    store.add_chunks([_chunk("kb1:c10", "d1", "kb1", 10)])
    assert rows.chunks("kb1") is None and rows.held() == 0 and scans[-1] == "chunks" and len(scans) == 4
    with pytest.raises(StoreError, match="'chunks' or 'knowledge'"):
        store.count_kb_rows("knowledge_bases", "kb1")
    store.close()


async def test_one_state_reads_the_change_token_once_and_sees_every_writer(location):
    """Inside ``one_state`` the token is read once (in worker threads too); this process' write
    is seen at once; another connection's commit (another process') by the first read after the
    block."""
    import asyncio

    store = KnowledgeStore(location)
    store.create_kb(_kb("kb1"))
    reads: list[int] = []
    original = store._conns.data_version
    store._conns.data_version = lambda: reads.append(1) or original()  # type: ignore[method-assign]
    with store.one_state() as token:
        assert len(reads) == 1 and store.change_token() == token
        assert await asyncio.to_thread(store.change_token) == token and len(reads) == 1
        other = KnowledgeStore(location)
        other.add_chunks([_chunk("kb1:c1", "d1", "kb1")])
        other.close()
        assert store.change_token() == token and len(reads) == 1  # seen after the block
        store.add_chunks([_chunk("kb1:c2", "d1", "kb1")])  # this process' write: read again
        moved = store.change_token()
        assert moved != token and moved[0] == token[0] + 1 and len(reads) == 2
    after = store.change_token()
    assert after[1] != token[1] and len(reads) == 3
    assert store.change_token() == after and len(reads) == 4  # outside a block: every call reads
    store.close()
