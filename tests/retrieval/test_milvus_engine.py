"""Contract tests: MilvusEngine (Milvus Lite through the real pymilvus gRPC client) against the
in-process LocalEngine on the same workspace.

Both engines must obey the same filters and return the same number of hits; dense search at exact
recall (a small collection, ``ef >= top_k``) returns the same chunk ids with the same cosine
scores; BM25 lists are compared by overlap, because Milvus computes BM25 statistics over the
collection (per segment in Milvus Lite) with its own analyser, not over one KB with bm25s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random

import numpy as np
import pytest

if os.environ.get("RAG_LAB_REQUIRE_EXTRAS") or os.environ.get("CI"):
    import milvus_lite  # noqa: F401  (make test / CI install the extra: never skip there)
    import pymilvus  # noqa: F401
else:
    pytest.importorskip("pymilvus", reason="the Milvus engine needs the 'milvus' extra (make test installs it)")
    pytest.importorskip("milvus_lite", reason="Milvus Lite comes with the 'milvus' extra")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rag_lab.knowledge.workspace import Workspace  # noqa: E402
from rag_lab.retrieval.base import SearchScope  # noqa: E402
from rag_lab.retrieval.engines import EngineConfigError, EngineRouter  # noqa: E402
from rag_lab.retrieval.fusion import normalize_vector_score  # noqa: E402
from rag_lab.retrieval.hybrid_search import HybridSearcher, SearchParams  # noqa: E402
from rag_lab.retrieval.milvus_engine import (  # noqa: E402
    MilvusConfig,
    MilvusEngine,
    MilvusEngineError,
    build_filter,
    collection_name,
    literal,
)
from tests.knowledge.hash_embedder import HashEmbedder  # noqa: E402

pytestmark = pytest.mark.slow

WORDS = (
    "river forest mountain engine copper orbit signal harbor lantern meadow glacier falcon circuit "
    "pepper saddle quartz velvet thunder canyon marble oyster pilgrim ribbon socket tundra walnut "
    "anchor beacon cobalt dune ember fjord granite hollow ivory juniper kettle lagoon mosaic nectar "
    "obsidian prism quiver rampart summit timber umbra vortex willow yonder zephyr bramble cinder"
).split()
HAN = "长城 故宫 黄河 长江 熊猫 茶叶 丝绸 瓷器 书法 京剧 饺子 灯笼 太极 武术 诗歌 山水".split()


def _corpus(seed: int, n: int, prefix: str, chinese: bool = False) -> list[dict]:
    rnd = random.Random(seed)
    docs = []
    for i in range(n):
        if chinese:
            text = "".join(rnd.choice(HAN) for _ in range(rnd.randint(6, 12))) + "。"
        else:
            text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(10, 18))) + "."
        docs.append({"id": f"{prefix}{i:03d}", "title": f"{prefix} {i}", "text": text, "tag_id": "abc"[i % 3]})
    return docs


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """(workspace, local engine, milvus engine, embedder, {name: kb}): four KBs ingested once,
    every KB mirrored into one Milvus Lite file by the workspace's ingestion hook."""
    root = tmp_path_factory.mktemp("milvus")
    emb = HashEmbedder()
    ws = Workspace(root / "ws")
    milvus = MilvusEngine(ws, {"uri": str(root / "milvus.db")})
    ws.mirror_for = lambda kb: milvus
    kbs = {
        "alpha": ws.create_kb("alpha", emb, chunk_size=400, chunk_overlap=0),
        "beta": ws.create_kb("beta", emb, chunk_size=400, chunk_overlap=0, tenant_id=7),
        "faq": ws.create_kb("faq", emb, kb_type="faq"),
        "words": ws.create_kb("words", None),
    }
    ws.ingest_documents(kbs["alpha"], _corpus(1, 90, "a") + _corpus(2, 30, "z", chinese=True), emb, progress=False)
    ws.ingest_documents(kbs["beta"], _corpus(3, 40, "b"), emb, progress=False)
    ws.ingest_faq(
        kbs["faq"],
        [
            {"id": "f1", "standard_question": "how do I reset my password", "similar_questions": ["forgot password"]},
            {"id": "f2", "standard_question": "where is the invoice", "answers": ["In the billing tab."]},
            {"id": "f3", "standard_question": "how to cancel my subscription", "similar_questions": ["stop plan"]},
        ],
        emb,
        progress=False,
    )
    ws.ingest_documents(kbs["words"], _corpus(4, 20, "w"), None, progress=False)
    yield ws, ws.engine(), milvus, emb, kbs
    milvus.close()
    ws.close()


def _ids(hits):
    return [h.chunk_id for h in hits]


def _queries(n: int, seed: int = 7) -> list[str]:
    rnd = random.Random(seed)
    return [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 4))) for _ in range(n)]


def _same_dense(a, b) -> None:
    """Same ids in the same order with the same scores; where two neighbours tie, either order."""
    assert len(a) == len(b)
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    for i, (x, y) in enumerate(zip(a, b)):
        if x.chunk_id != y.chunk_id:
            tied = [h.chunk_id for h in a if abs(h.score - x.score) < 1e-5]
            assert y.chunk_id in tied, f"rank {i}: {x.chunk_id} vs {y.chunk_id}"


def test_every_searchable_chunk_is_mirrored(engines):
    ws, _, milvus, _, kbs = engines
    assert milvus.count(kbs["alpha"]) == ws.store.count_chunks(kbs["alpha"].id) == 120
    assert milvus.count(kbs["beta"]) == 40
    assert milvus.count(kbs["faq"]) == 5  # one row per question: 2 + 1 + 2
    assert milvus.count(kbs["words"]) == 20
    assert collection_name("rag_lab", kbs["alpha"]) == collection_name("rag_lab", kbs["beta"])
    assert collection_name("rag_lab", kbs["words"]) == "rag_lab_keywords"


@pytest.mark.parametrize("top_k", [1, 10, 50])
def test_dense_search_same_ids_and_scores(engines, top_k):
    _, local, milvus, emb, kbs = engines
    for q in _queries(12):
        v = emb.embed([q])[0]
        a = local.vector_search(v, SearchScope([kbs["alpha"].id], top_k, 0.0))
        b = milvus.vector_search(v, SearchScope([kbs["alpha"].id], top_k, 0.0))
        assert len(a) == top_k
        _same_dense(a, b)
        assert all(h.match_type == 0 and h.knowledge_base_id == kbs["alpha"].id for h in b)
        assert b[0].content == a[0].content


def test_dense_search_over_two_kbs_merges_like_local(engines):
    _, local, milvus, emb, kbs = engines
    ids = [kbs["alpha"].id, kbs["beta"].id]
    for q in _queries(6, seed=11):
        v = emb.embed([q])[0]
        a, b = local.vector_search(v, SearchScope(ids, 25, 0.0)), milvus.vector_search(v, SearchScope(ids, 25, 0.0))
        _same_dense(a, b)
        assert {h.knowledge_base_id for h in b} == {h.knowledge_base_id for h in a}


def test_vector_threshold_applied_keyword_threshold_ignored(engines):
    _, local, milvus, emb, kbs = engines
    v = emb.embed(["copper orbit signal"])[0]
    full = local.vector_search(v, SearchScope([kbs["alpha"].id], 40, 0.0))
    cut = full[5].score
    a = local.vector_search(v, SearchScope([kbs["alpha"].id], 40, cut))
    b = milvus.vector_search(v, SearchScope([kbs["alpha"].id], 40, cut))
    assert len(a) >= 6 and all(h.score >= cut for h in b)
    _same_dense(a, b)
    assert milvus.keyword_search("copper", SearchScope([kbs["alpha"].id], 10, threshold=1e9)) != []


FILTERS = [
    {"knowledge_ids": ["a001", "a002", "a010", "b003"]},
    {"tag_ids": ["b"]},
    {"knowledge_ids": ["a001", "a002", "a003", "a004"], "tag_ids": ["b", "c"]},
]


@pytest.mark.parametrize("flt", FILTERS)
def test_filters_obeyed_by_both(engines, flt):
    ws, local, milvus, emb, kbs = engines
    ids = [kbs["alpha"].id, kbs["beta"].id]
    allowed = set().union(
        *(ws.store.searchable_chunk_ids(k, flt.get("knowledge_ids", ()), flt.get("tag_ids", ())) for k in ids)
    )
    v = emb.embed(["granite summit timber"])[0]
    a = local.vector_search(v, SearchScope(ids, 100, -1.0, **flt))
    b = milvus.vector_search(v, SearchScope(ids, 100, -1.0, **flt))
    assert set(_ids(a)) == set(_ids(b)) == allowed  # every allowed chunk, nothing else
    _same_dense(a, b)
    ka = local.keyword_search("granite summit timber", SearchScope(ids, 100, 0.0, **flt))
    kb_ = milvus.keyword_search("granite summit timber", SearchScope(ids, 100, 0.0, **flt))
    assert set(_ids(kb_)) <= allowed and set(_ids(ka)) <= allowed
    assert set(_ids(kb_)) == set(_ids(ka))  # every chunk containing a query word, nothing else


def test_bm25_lists_overlap(engines):
    """Top-10 BM25 lists agree on most chunks (statistics and analysers differ, see module doc)."""
    _, local, milvus, _, kbs = engines
    overlaps = []
    for q in _queries(20, seed=3):
        a = _ids(local.keyword_search(q, SearchScope([kbs["alpha"].id], 10, 0.0)))
        b = _ids(milvus.keyword_search(q, SearchScope([kbs["alpha"].id], 10, 0.0)))
        assert len(a) == len(b) == 10  # 90 English docs of 10-18 words from 52: every query matches >10
        overlaps.append(len(set(a) & set(b)) / 10)
    assert np.mean(overlaps) >= 0.7, overlaps
    assert min(overlaps) >= 0.4, overlaps


def test_chinese_keywords_found_with_jieba(engines):
    _, local, milvus, _, kbs = engines
    a = local.keyword_search("熊猫和瓷器", SearchScope([kbs["alpha"].id], 50, 0.0))
    b = milvus.keyword_search("熊猫和瓷器", SearchScope([kbs["alpha"].id], 50, 0.0))
    assert len(b) > 0 and all(h.knowledge_id.startswith("z") for h in b)
    assert set(_ids(a)) == set(_ids(b))


def test_keyword_only_kb(engines):
    _, local, milvus, emb, kbs = engines
    a = local.keyword_search("meadow glacier", SearchScope([kbs["words"].id], 5, 0.0))
    b = milvus.keyword_search("meadow glacier", SearchScope([kbs["words"].id], 5, 0.0))
    assert len(a) == len(b) > 0 and set(_ids(a)) & set(_ids(b))
    assert milvus.vector_search(emb.embed(["x"])[0], SearchScope([kbs["words"].id], 5, 0.0)) == []


def test_faq_questions_are_entries(engines):
    _, local, milvus, emb, kbs = engines
    v = emb.embed(["forgot my password"])[0]
    a = local.vector_search(v, SearchScope([kbs["faq"].id], 5, 0.0))
    b = milvus.vector_search(v, SearchScope([kbs["faq"].id], 5, 0.0))
    _same_dense(a, b)
    assert [h.id for h in b][:1] == [f"{kbs['faq'].id}:f1#faq#q1"] and b[0].content == "forgot password"
    assert b[0].source_type == "faq" and b[0].chunk_id == f"{kbs['faq'].id}:f1#faq"


def test_tenant_field_written_and_filtered(engines):
    """Rows carry the KB owner's tenant; a search for another tenant's rows finds nothing."""
    _, _, milvus, emb, kbs = engines
    name = milvus.collection_for(kbs["alpha"])
    for kb, tenant in ((kbs["alpha"], 1), (kbs["beta"], 7)):
        rows = milvus.client.query(name, filter=f"kb_id == {literal(kb.id)}", output_fields=["tenant_id"], limit=500)
        assert {r["tenant_id"] for r in rows} == {tenant}
    v = emb.embed(["river"])[0].tolist()
    both = [kbs["alpha"].id, kbs["beta"].id]
    hits = milvus.client.search(name, data=[v], anns_field="dense", limit=200, filter=build_filter(both, [7]))[0]
    assert hits and all(h["id"].startswith(kbs["beta"].id) for h in hits)
    assert milvus.client.search(name, data=[v], anns_field="dense", limit=5, filter=build_filter(both, [3]))[0] == []


def test_sqlite_stays_the_source_of_truth(tmp_path, embedder):
    """Disabled chunks vanish from both engines at once (same top-k); a deleted or re-ingested
    document is deleted / replaced in Milvus; a KB re-indexes from SQLite."""
    ws = Workspace(tmp_path / "ws")
    milvus = MilvusEngine(ws, {"uri": str(tmp_path / "m.db"), "collection_prefix": "t_truth"})
    ws.mirror_for = lambda kb: milvus
    kb = ws.create_kb("k", embedder)
    docs = _corpus(5, 30, "d")
    ws.ingest_documents(kb, docs, embedder, progress=False)
    local = ws.engine()
    v = embedder.embed(["forest engine copper"])[0]
    top = local.vector_search(v, SearchScope([kb.id], 5, -1.0))
    ws.store.set_chunks_enabled([top[0].chunk_id, top[2].chunk_id], False)  # SQLite only
    a, b = local.vector_search(v, SearchScope([kb.id], 5, -1.0)), milvus.vector_search(v, SearchScope([kb.id], 5, -1.0))
    assert len(a) == len(b) == 5 and top[0].chunk_id not in _ids(b)
    _same_dense(a, b)
    ws.store.set_chunks_enabled([top[0].chunk_id, top[2].chunk_id], True)

    ws.delete_knowledge(kb, "d000")
    assert milvus.count(kb) == 29
    docs[1] = {**docs[1], "text": "a brand new text about saxophones"}
    ws.ingest_documents(kb, docs[1:], embedder, progress=False)
    hits = milvus.keyword_search("saxophones", SearchScope([kb.id], 5, 0.0))
    assert [h.knowledge_id for h in hits] == ["d001"] and milvus.count(kb) == 29

    milvus.drop_kb(kb)
    assert milvus.count(kb) == 0 and milvus.vector_search(v, SearchScope([kb.id], 5, 0.0)) == []
    counts = milvus.index_documents(kb)  # vectors from the local index
    assert (counts.rows, counts.documents, counts.embedded) == (29, 29, 0)
    _same_dense(
        local.vector_search(v, SearchScope([kb.id], 10, 0.0)), milvus.vector_search(v, SearchScope([kb.id], 10, 0.0))
    )

    ws.vector_index(kb).remove_chunks([f"{kb.id}:d002#c0"])  # a vector the local index lost
    with pytest.raises(MilvusEngineError, match="no vector for entry 'kb_[0-9a-f]+:d002#c0'"):
        milvus.index_documents(kb, ["d002"])
    assert milvus.index_documents(kb, ["d002"], embedder=embedder).embedded == 1
    assert milvus.count(kb) == 29
    milvus.close()
    ws.close()


def test_hybrid_search_over_mixed_engines(tmp_path, embedder):
    """A lab config routes one KB to Milvus and one to the local engine: HybridSearch forms two
    store groups, fuses their lists itself and maps Milvus vector scores with (s+1)/2 (§5.9)."""
    ws = Workspace(tmp_path / "ws")
    router = EngineRouter(
        ws,
        {"type": "local"},
        {"remote": {"engine": {"type": "milvus", "uri": str(tmp_path / "m.db"), "collection_prefix": "t_mixed"}}},
    )
    ws.mirror_for = router.mirror_for
    remote, here = ws.create_kb("remote", embedder), ws.create_kb("here", embedder)
    ws.ingest_documents(remote, _corpus(8, 20, "r"), embedder, progress=False)
    ws.ingest_documents(here, _corpus(9, 20, "h"), embedder, progress=False)
    assert router.mirror_for(here) is None and router.mirror_for(remote).count(remote) == 20

    searcher = HybridSearcher(ws, lambda kb: embedder, engine_for=router.engine_for)
    sp = SearchParams(query_text="forest engine copper", match_count=8, knowledge_base_ids=[remote.id, here.id])
    results, trace = asyncio.run(searcher.search_with_trace(remote.id, sp))
    assert {g for g, *_ in trace.requests} == {"", router.engine_for(remote)[0]}
    assert trace.fusion == "rrf" and len(results) == 8
    v = embedder.embed(["forest engine copper"])[0]
    raw = {
        h.chunk_id: h.score for h in router.engine_for(remote)[1].vector_search(v, SearchScope([remote.id], 100, 0.0))
    }
    mapped = [h for h in trace.vector_hits if h.knowledge_base_id == remote.id]
    assert mapped and all(h.score == pytest.approx(normalize_vector_score("milvus", raw[h.chunk_id])) for h in mapped)
    assert all(h.score == pytest.approx((raw[h.chunk_id] + 1) / 2) for h in mapped)
    router.close()
    ws.close()


def test_config_errors_name_the_setting(tmp_path, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    with pytest.raises(EngineConfigError, match=r"engine.type='qdrant' is not one of local, milvus"):
        EngineRouter(ws, {"type": "qdrant"})
    with pytest.raises(EngineConfigError, match=r"knowledge_bases.docs.engine: unknown key\(s\) url"):
        EngineRouter(ws, None, {"docs": {"engine": {"type": "milvus", "url": "x.db"}}})
    with pytest.raises(EngineConfigError, match="needs 'uri'"):
        EngineRouter(ws, {"type": "milvus"})
    with pytest.raises(EngineConfigError, match="hnsw_m=1 must be an integer in"):
        EngineRouter(ws, {"type": "milvus", "uri": "x.db", "hnsw_m": 1})
    monkeypatch.delenv("RAG_LAB_TEST_NO_TOKEN", raising=False)
    cfg = MilvusConfig(uri="http://127.0.0.1:1", token_env="RAG_LAB_TEST_NO_TOKEN")
    with pytest.raises(MilvusEngineError, match="'RAG_LAB_TEST_NO_TOKEN' is not set"):
        cfg.token()
    monkeypatch.setenv("RAG_LAB_TEST_NO_TOKEN", "root:Milvus")
    assert cfg.token() == "root:Milvus"
    ws.close()


def test_collection_of_another_dimension_is_refused(tmp_path):
    ws = Workspace(tmp_path / "ws")
    eng = MilvusEngine(ws, {"uri": str(tmp_path / "m.db"), "collection_prefix": "t_dim"})
    a = ws.create_kb("a", HashEmbedder(16, name="same"))
    b = dataclasses.replace(a, embedding_dim=32)
    schema, index_params = eng._schema(a)  # a 16-d collection under the name of b's space
    eng.client.create_collection(eng.collection_for(b), schema=schema, index_params=index_params)
    with pytest.raises(MilvusEngineError, match="has dense dimension 16, but knowledge base 'a' needs 32"):
        eng.ensure_collection(b)
    eng.close()
    ws.close()


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30))
def test_filter_literals_round_trip(lite_keywords, value):
    """Any knowledge id (quotes, backslashes, CJK, ...) is matched exactly by its literal."""
    client, name = lite_keywords
    client.delete(name, filter='id != ""')
    rows = [{"id": "x", "kid": value}, {"id": "y", "kid": value + "_"}]
    client.insert(name, [{**r, "v": [1.0, 0.0]} for r in rows])
    got = client.query(name, filter=f"kid == {literal(value)}", output_fields=["kid"])
    assert [r["kid"] for r in got] == [value]


@pytest.fixture(scope="module")
def lite_keywords(tmp_path_factory):
    from pymilvus import DataType, MilvusClient

    client = MilvusClient(str(tmp_path_factory.mktemp("lit") / "l.db"))
    s = client.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
    s.add_field("kid", DataType.VARCHAR, max_length=1024)
    s.add_field("v", DataType.FLOAT_VECTOR, dim=2)
    ip = client.prepare_index_params()
    ip.add_index(field_name="v", index_type="FLAT", metric_type="COSINE")
    client.create_collection("lit", schema=s, index_params=ip)
    yield client, "lit"
    client.close()


def test_cli_ingest_ask_and_reindex_through_milvus(tmp_path, capsys, docs_dir):
    """A KB routed to Milvus in the lab config: ingestion writes to it, ``ask`` searches it, and
    ``rag-lab reindex`` rebuilds it from SQLite."""
    import yaml

    from rag_lab.cli import main
    from rag_lab.lab.lab import Lab

    uri = str(tmp_path / "team.db")
    cfg = tmp_path / "lab.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "workspace": str(tmp_path / "ws"),
                "knowledge_bases": {"demo": {"engine": {"type": "milvus", "uri": uri, "collection_prefix": "cli"}}},
            }
        )
    )
    assert main(["--config", str(cfg), "ingest", str(docs_dir), "--kb", "demo", "--quiet"]) == 0
    lab = Lab.from_config(cfg)
    kb = lab.workspace.get_kb("demo")
    key, engine = lab.engines.engine_for(kb)
    assert isinstance(engine, MilvusEngine) and key == "milvus:" + uri + "||cli"
    n = engine.count(kb)
    assert n == lab.workspace.store.count_chunks(kb.id) > 0
    calls = []
    for name in ("vector_search", "keyword_search"):
        orig = getattr(engine, name)
        setattr(engine, name, lambda *a, _o=orig, _n=name, **k: calls.append(_n) or _o(*a, **k))
    run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    assert "Mara Quill" in run.answer
    assert "vector_search" in calls and "keyword_search" in calls  # the search went through Milvus
    engine.drop_kb(kb)
    assert engine.count(kb) == 0
    lab.engines.close()
    capsys.readouterr()
    assert main(["--config", str(cfg), "reindex", "--kb", "demo"]) == 0
    out = capsys.readouterr()
    assert f"reindexed 'demo' into Milvus at {uri}: {n} rows" in out.out and "note:" not in out.err
    assert engine.count(kb) == n
    other = str(tmp_path / "other.db")
    assert main(["--config", str(cfg), "reindex", "--kb", "demo", "--uri", other]) == 0
    assert "does not route 'demo' to this store" in capsys.readouterr().err
