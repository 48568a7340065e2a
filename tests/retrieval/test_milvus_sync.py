"""Milvus kept equal to SQLite (rag_lab.retrieval.milvus_sync): upserts keyed by row id, the
journal of unacknowledged writes (a failed write is retried at the next ingest or open), row
counts compared on open (a missing or lagging copy repaired, or refused with the command), and
owner / enabled flags written into Milvus when they change. One Milvus Lite server for the
module; each test has its own workspace and collection prefix."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading

import numpy as np
import pytest

if os.environ.get("RAG_LAB_REQUIRE_EXTRAS") or os.environ.get("CI"):
    import milvus_lite  # noqa: F401  (make test / CI install the extra: never skip there)
    import pymilvus  # noqa: F401
else:
    pytest.importorskip("pymilvus", reason="the Milvus engine needs the 'milvus' extra (make test installs it)")
    pytest.importorskip("milvus_lite", reason="Milvus Lite comes with the 'milvus' extra")

from rag_lab.knowledge.workspace import Workspace  # noqa: E402
from rag_lab.retrieval.base import SearchScope  # noqa: E402
from rag_lab.retrieval.hybrid_search import HybridSearcher, SearchParams  # noqa: E402
from rag_lab.retrieval.milvus_engine import (  # noqa: E402
    MilvusEngineError,
    MilvusSyncError,
    build_filter,
    literal,
)
from rag_lab.retrieval.milvus_sync import expected_row_ids  # noqa: E402
from tests.retrieval.lite_engines import lite_engine as _engine  # noqa: E402

pytestmark = pytest.mark.slow

TEXTS = [
    "river forest mountain engine copper orbit signal harbor",
    "lantern meadow glacier falcon circuit pepper saddle quartz",
    "velvet thunder canyon marble oyster pilgrim ribbon socket",
    "tundra walnut anchor beacon cobalt dune ember fjord",
    "granite hollow ivory juniper kettle lagoon mosaic nectar",
    "obsidian prism quiver rampart summit timber umbra vortex",
]


def _docs(texts=TEXTS):
    return [{"id": f"d{i}", "title": f"doc {i}", "text": t} for i, t in enumerate(texts)]


def _milvus_ids(eng, kb) -> set[str]:
    rows = eng.client.query(eng.collection_for(kb), filter=f"kb_id == {literal(kb.id)}", output_fields=["id"])
    return {r["id"] for r in rows}


def _sqlite_ids(ws, kb) -> set[str]:
    return set(expected_row_ids(kb, ws.store.list_chunks(kb.id)))


class Outage:
    """A Milvus write fault injected in the client: insert / upsert / delete raise while ``on``."""

    def __init__(self, monkeypatch, client) -> None:
        self.on, self.calls = True, 0
        for name in ("insert", "upsert", "delete"):
            orig = getattr(client, name)
            monkeypatch.setattr(client, name, self._wrap(orig))

    def _wrap(self, orig):
        def call(*a, **k):
            self.calls += 1
            if self.on:
                raise ConnectionError("simulated Milvus outage")
            return orig(*a, **k)

        return call


def test_a_failed_write_is_journalled_refused_then_retried(tmp_path, lite, embedder, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    eng = _engine(ws, lite, "t_retry")
    ws.mirror_for = lambda kb: eng
    kb = ws.create_kb("k", embedder, chunk_size=80, chunk_overlap=0)
    docs = _docs()
    ws.ingest_documents(kb, docs, embedder, progress=False)
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb) and len(_sqlite_ids(ws, kb)) == 6

    outage = Outage(monkeypatch, eng.client)
    docs[1] = {**docs[1], "text": "a brand new text about saxophones"}
    report = ws.ingest_documents(kb, docs, embedder, progress=False)  # SQLite commits, Milvus fails
    assert report.updated == ["d1"] and outage.calls >= 1
    assert any("'k'" in w and "pending" in w and "simulated Milvus outage" in w for w in report.warnings)
    assert [(kid, op) for kid, op, _ in ws.store.sync.pending(kb.id, eng.config.key)] == [("d1", "doc")]
    assert "simulated Milvus outage" in ws.store.sync.state(kb.id, eng.config.key)["last_error"]

    # while Milvus still fails, a search refuses (it does not read a copy known to be behind)
    v = embedder.embed(["saxophones"])[0]
    with pytest.raises(MilvusSyncError) as err:
        eng.vector_search(v, SearchScope([kb.id], 3, 0.0))
    msg = str(err.value)
    assert f"knowledge base 'k' ({kb.id})" in msg and "Milvus holds 6 rows, SQLite 6" in msg
    assert f"rag-lab reindex --kb k --engine milvus --uri {eng.config.uri}" in msg

    # while a writer holds the KB, a search leaves out the documents it has pending
    outage.on = False
    held, release = threading.Event(), threading.Event()

    def writer():
        with ws.kb_lock(kb):
            held.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    assert held.wait(10)
    try:
        kept = eng.vector_search(v, SearchScope([kb.id], 6, -1.0))
    finally:
        release.set()
        t.join()
    assert {h.knowledge_id for h in kept} == {"d0", "d2", "d3", "d4", "d5"}
    assert [kid for kid, _, _ in ws.store.sync.pending(kb.id, eng.config.key)] == ["d1"]

    # the next ingest retries, although nothing changed since
    again = ws.ingest_documents(kb, docs, embedder, progress=False)
    assert len(again.unchanged) == 6 and not again.changed and not again.warnings
    assert ws.store.sync.pending(kb.id, eng.config.key) == []
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb)
    assert [h.knowledge_id for h in eng.keyword_search("saxophones", SearchScope([kb.id], 3, 0.0))] == ["d1"]
    row = eng.client.get(eng.collection_for(kb), ids=[f"{kb.id}:d1#c0"], output_fields=["dense"])[0]
    local = ws.vector_index(kb)
    entries, vecs = local.export_vectors()
    want = vecs[[e.entry_id for e in entries].index(f"{kb.id}:d1#c0")]
    assert np.allclose(row["dense"], want, atol=1e-6)

    # a deletion that Milvus missed is retried when the KB is opened by another process
    outage.on = True
    ws.delete_knowledge(kb, "d2")
    assert [(kid, op) for kid, op, _ in ws.store.sync.pending(kb.id, eng.config.key)] == [("d2", "doc")]
    outage.on = False
    fresh = _engine(ws, lite, "t_retry")  # a second process: nothing verified yet
    hits = fresh.keyword_search("velvet thunder canyon", SearchScope([kb.id], 5, 0.0))
    assert "d2" not in {h.knowledge_id for h in hits}
    assert ws.store.sync.pending(kb.id, eng.config.key) == []
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb) and len(_sqlite_ids(ws, kb)) == 5
    ws.close()


def test_reingest_upserts_by_id_and_drops_rows_the_document_lost(tmp_path, lite, embedder, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    eng = _engine(ws, lite, "t_upsert")
    ws.mirror_for = lambda kb: eng
    kb = ws.create_kb("k", embedder, chunk_size=60, chunk_overlap=0)
    long = " ".join(TEXTS[:3])  # three chunks
    ws.ingest_documents(kb, [{"id": "d0", "text": long}, {"id": "d1", "text": TEXTS[4]}], embedder, progress=False)
    before = _milvus_ids(eng, kb)
    assert len([i for i in before if ":d0#" in i]) == 3
    deletes: list[str] = []
    orig = eng.client.delete
    monkeypatch.setattr(eng.client, "delete", lambda *a, **k: deletes.append(k.get("filter", "")) or orig(*a, **k))
    ws.ingest_documents(kb, [{"id": "d0", "text": TEXTS[5]}, {"id": "d1", "text": TEXTS[4]}], embedder, progress=False)
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb) == {f"{kb.id}:d0#c0", f"{kb.id}:d1#c0"}
    # rows are replaced by id, and only the ids d0 no longer has are deleted (not the document first)
    assert deletes and all(d.startswith("id in [") for d in deletes)
    assert [h.knowledge_id for h in eng.keyword_search("obsidian", SearchScope([kb.id], 3, 0.0))] == ["d0"]

    ws.delete_kb(kb)  # rows, sync state and journal go; a namesake (same id) starts afresh
    assert _milvus_ids(eng, kb) == set() and ws.store.sync.state(kb.id, eng.config.key) is None
    kb = ws.create_kb("k", embedder, chunk_size=60, chunk_overlap=0)
    ws.ingest_documents(kb, [{"id": "e0", "text": TEXTS[3]}], embedder, progress=False)
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb) == {f"{kb.id}:e0#c0"}
    ws.store.set_chunks_enabled([f"{kb.id}:e0#c0"], False)  # journalled: the namesake is attached
    assert [kid for kid, _, _ in ws.store.sync.pending(kb.id, eng.config.key)] == ["e0"]
    ws.close()


def test_engine_switch_without_reindex_is_repaired_when_cheap(tmp_path, lite, embedder):
    ws = Workspace(tmp_path / "ws")
    kb = ws.create_kb("k", embedder, chunk_size=80, chunk_overlap=0)
    ws.ingest_documents(kb, _docs(), embedder, progress=False)  # local engine only
    eng = _engine(ws, lite, "t_switch")
    ws.mirror_for = lambda kb: eng  # the config now routes the KB to Milvus; no reindex was run
    assert not eng.client.has_collection(eng.collection_for(kb))
    v = embedder.embed(["copper orbit"])[0]
    a = ws.engine().vector_search(v, SearchScope([kb.id], 4, 0.0))
    b = eng.vector_search(v, SearchScope([kb.id], 4, 0.0))  # repaired on open: copied, then searched
    assert [h.chunk_id for h in b] == [h.chunk_id for h in a] and len(b) == 4
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb)
    assert ws.store.sync.state(kb.id, eng.config.key)["engine_rows"] == 6

    # Milvus lost rows behind our back: the next process to open the KB copies it again
    eng.client.delete(eng.collection_for(kb), filter=f'id in ["{kb.id}:d0#c0", "{kb.id}:d3#c0"]')
    fresh = _engine(ws, lite, "t_switch")
    assert len(fresh.vector_search(v, SearchScope([kb.id], 6, -1.0))) == 6
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb)

    # the other way round: a chunk gone from SQLite with no journal entry (a lost write): Milvus
    # holds one row too many, which is out of step too, and the stale row must not be searched
    with ws.store._transaction() as conn:
        conn.execute("DELETE FROM chunks WHERE id = ?", (f"{kb.id}:d5#c0",))
    stale = _engine(ws, lite, "t_switch")
    assert len(stale.vector_search(v, SearchScope([kb.id], 6, -1.0))) == 5
    assert _milvus_ids(eng, kb) == _sqlite_ids(ws, kb) and len(_sqlite_ids(ws, kb)) == 5
    ws.close()


def test_engine_switch_without_reindex_is_refused_with_the_command(tmp_path, lite, embedder):
    ws = Workspace(tmp_path / "ws")
    kb = ws.create_kb("team docs", embedder, chunk_size=80, chunk_overlap=0)
    ws.ingest_documents(kb, _docs(), embedder, progress=False)
    eng = _engine(ws, lite, "t_refuse", repair_max_rows=5)
    ws.mirror_for = lambda kb: eng
    v = embedder.embed(["copper orbit"])[0]
    for search in (
        lambda: eng.vector_search(v, SearchScope([kb.id], 4, 0.0)),
        lambda: eng.keyword_search("copper", SearchScope([kb.id], 4, 0)),
    ):
        with pytest.raises(MilvusSyncError) as err:
            search()
        msg = str(err.value)
        assert f"knowledge base 'team docs' ({kb.id})" in msg and "Milvus holds 0 rows, SQLite 6" in msg
        assert "6 rows > repair_max_rows 5" in msg
        assert f"run: rag-lab reindex --kb 'team docs' --engine milvus --uri {eng.config.uri}" in msg
    searcher = HybridSearcher(ws, lambda kb: embedder, engine_for=lambda kb: (eng.config.key, eng))
    sp = SearchParams(query_text="copper orbit", match_count=4, knowledge_base_ids=[kb.id])
    with pytest.raises(Exception) as err:  # the pipeline's search fails: no silently empty list
        asyncio.run(searcher.search(kb.id, sp))
    chain, exc = [], err.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__
    assert any(isinstance(e, MilvusSyncError) and "rag-lab reindex" in str(e) for e in chain), chain
    counts = eng.index_documents(kb, embedder=embedder)  # what `rag-lab reindex` runs
    assert counts.rows == 6 and ws.store.sync.pending(kb.id, eng.config.key) == []
    assert len(eng.vector_search(v, SearchScope([kb.id], 4, 0.0))) == 4
    assert len(asyncio.run(searcher.search(kb.id, sp))) == 4
    ws.close()


def test_owner_change_and_enabled_flags_are_written_into_milvus(tmp_path, lite, embedder, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    eng = _engine(ws, lite, "t_flags")
    ws.mirror_for = lambda kb: eng
    kb = ws.create_kb("k", embedder, chunk_size=80, chunk_overlap=0, tenant_id=1)
    ws.ingest_documents(kb, _docs(), embedder, progress=False)
    name = eng.collection_for(kb)
    v = embedder.embed(["granite hollow"])[0]
    assert len(eng.vector_search(v, SearchScope([kb.id], 6, -1.0))) == 6

    ws.store.update_kb(dataclasses.replace(kb, tenant_id=5))  # the KB changes owner in SQLite
    kb = ws.get_kb(kb.id)
    assert len(eng.vector_search(v, SearchScope([kb.id], 6, -1.0))) == 6  # the filter asks for tenant 5: rows have it
    vec = v.tolist()
    assert (
        len(eng.client.search(name, data=[vec], anns_field="dense", limit=10, filter=build_filter([kb.id], [5]))[0])
        == 6
    )
    assert eng.client.search(name, data=[vec], anns_field="dense", limit=10, filter=build_filter([kb.id], [1]))[0] == []

    filters: list[str] = []
    orig = eng.client.search
    monkeypatch.setattr(eng.client, "search", lambda *a, **k: filters.append(k["filter"]) or orig(*a, **k))
    off = f"{kb.id}:d4#c0"
    ws.store.set_chunks_enabled([off], False)
    hits = eng.vector_search(v, SearchScope([kb.id], 6, -1.0))
    assert len(hits) == 5 and off not in {h.chunk_id for h in hits}  # a full top-k without the chunk
    assert eng.client.get(name, ids=[off], output_fields=["is_enabled"])[0]["is_enabled"] is False
    assert filters and all(off not in f for f in filters)  # the flag is in Milvus, not in the filter
    ws.store.set_chunks_enabled([off], True)
    assert off in {h.chunk_id for h in eng.vector_search(v, SearchScope([kb.id], 6, -1.0))}
    assert eng.client.get(name, ids=[off], output_fields=["is_enabled"])[0]["is_enabled"] is True
    assert ws.store.sync.pending(kb.id, eng.config.key) == []
    ws.close()


def test_open_checks_the_layout_and_says_how_to_migrate(tmp_path, lite, embedder):
    from pymilvus import DataType

    ws = Workspace(tmp_path / "ws")
    kb = ws.create_kb("k", embedder)
    _engine(ws, lite, "t_schema").ensure_collection(kb)
    name = _engine(ws, lite, "t_schema").ensure_collection(kb)  # our own layout, opened again: accepted
    with pytest.raises(MilvusEngineError) as err:
        _engine(ws, lite, "t_schema", index_type="IVF_FLAT").ensure_collection(kb)
    msg = str(err.value)
    assert f"Milvus collection {name!r} (knowledge base 'k')" in msg
    assert "the dense index is HNSW, the config asks for IVF_FLAT" in msg
    assert "Migrate: set collection_prefix: t_schema_v2" in msg and "rag-lab reindex --kb k --engine milvus" in msg

    old = _engine(ws, lite, "t_old")  # a collection of an older layout: no tenant field, standard analyser
    client = old.client
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=2048)
    s.add_field(
        "text", DataType.VARCHAR, max_length=65535, enable_analyzer=True, analyzer_params={"tokenizer": "standard"}
    )
    s.add_field("dense", DataType.FLOAT_VECTOR, dim=embedder.dimension)
    ip = client.prepare_index_params()
    ip.add_index(field_name="dense", index_type="HNSW", metric_type="COSINE")
    client.create_collection(old.collection_for(kb), schema=s, index_params=ip)
    with pytest.raises(MilvusEngineError) as err:
        old.ensure_collection(kb)
    msg = str(err.value)
    assert "field 'tenant_id' is missing" in msg and "no BM25 function from 'text' to 'sparse'" in msg
    assert 'field \'text\' is analysed with {"tokenizer": "standard"}' in msg
    ws.close()


def test_shards_consistency_per_search_and_flush_policy_reach_the_client(tmp_path, lite, embedder, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    eng = _engine(ws, lite, "t_cfg", num_shards=2, search_consistency_level="Bounded", flush="never")
    ws.mirror_for = lambda kb: eng
    calls: dict[str, list] = {"create_collection": [], "search": [], "flush": []}
    for name in calls:
        orig = getattr(eng.client, name)
        monkeypatch.setattr(eng.client, name, lambda *a, _o=orig, _n=name, **k: calls[_n].append(k) or _o(*a, **k))
    kb = ws.create_kb("k", embedder, chunk_size=80, chunk_overlap=0)
    ws.ingest_documents(kb, _docs(), embedder, progress=False)
    assert [k["num_shards"] for k in calls["create_collection"]] == [2]
    assert calls["flush"] == []  # flush: never (a server's policy), even on Lite
    assert len(eng.vector_search(embedder.embed(["copper"])[0], SearchScope([kb.id], 3, 0.0))) == 3
    assert eng.keyword_search("copper", SearchScope([kb.id], 3, 0.0))
    assert [k["consistency_level"] for k in calls["search"]] == ["Bounded", "Bounded"]
    ws.close()
