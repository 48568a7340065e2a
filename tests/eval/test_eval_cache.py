"""Stage cache: content-addressed store, keys, invalidation, reuse across post-retrieval params,
identical pipeline output, and the BM25 index cache."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rag_lab
from rag_lab import blobstore
from rag_lab.blobstore import ROW_OVERHEAD
from rag_lab.eval.cache import (
    Bm25IndexCache,
    CachingEmbedder,
    CachingReranker,
    StageCache,
    canonical_json,
    code_version,
    code_version_for,
    enable_stage_cache,
    search_kb_fields,
    search_param_fields,
)
from rag_lab.eval.runner import evaluate_lab
from rag_lab.types.params import PipelineParams

# --------------------------------------------------------------------------- the store


def test_put_get_hit_miss_and_fresh_objects(tmp_path: Path) -> None:
    c = StageCache(tmp_path / "c")
    key = {"b": 1, "a": [1.5, "x"]}
    assert c.get("search", key) is None
    c.put("search", key, {"rows": [1, 2]})
    assert (tmp_path / "c" / "stages.sqlite").is_file()
    assert c.row_key("search", key) == c.row_key("search", {"a": [1.5, "x"], "b": 1})  # key order does not matter
    assert c.row_key("search", key) == hashlib.sha256(b'2\x00search\x00{"a":[1.5,"x"],"b":1}').digest()
    got = c.get("search", key)
    assert got == {"rows": [1, 2]}
    got["rows"].append(3)  # callers may mutate what they get
    assert c.get("search", key) == {"rows": [1, 2]}
    assert c.get("rerank", key) is None  # stages are separate namespaces
    st = c.stats()
    assert (st["search"].hits, st["search"].misses, st["search"].writes) == (2, 1, 1)
    assert st["rerank"].misses == 1 and st["search"].hit_rate == pytest.approx(2 / 3)
    assert (c.entries(), c.entries("search"), c.entries("rerank")) == (1, 1, 0)
    assert c.store_stats()["spaces"] == {"search": {"rows": 1, "bytes": len(b'{"rows":[1,2]}') + ROW_OVERHEAD}}
    c.put("search", key, {"rows": [7]})  # the last writer wins, counted once
    assert c.get("search", key) == {"rows": [7]} and c.entries() == 1
    assert c.store_stats()["bytes"] == len(b'{"rows":[7]}') + ROW_OVERHEAD
    # a second process reading the same folder (no memory layer) sees the entry
    assert StageCache(tmp_path / "c", memory_entries=0).get("search", key) == {"rows": [7]}


def test_damaged_or_unreadable_entries_are_misses_and_errors(tmp_path: Path) -> None:
    c = StageCache(tmp_path, memory_entries=0)
    key = {"q": "x"}
    c.put("embed", key, [1.0])
    for damaged in (b"{not json", b"\xff\xfe", b"[1.0"):
        with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
            conn.execute("UPDATE entries SET value = ?", (damaged,))
        assert c.get("embed", key) is None, damaged
    assert c.stats()["embed"].errors == 3 and c.stats()["embed"].misses == 3
    c.put("embed", key, {"v": [3, "é"]})  # rewritten by the next put
    assert c.get("embed", key) == {"v": [3, "é"]}
    # a file that cannot be opened: every read a miss and an error, every write an error, no raise
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "stages.sqlite").write_bytes(b"not a database" * 100)
    c2 = StageCache(bad)
    assert c2.get("embed", key) is None
    c2.put("embed", key, [1.0])
    assert (c2.stats()["embed"].errors, c2.stats()["embed"].misses, c2.stats()["embed"].writes) == (2, 1, 0)
    with pytest.raises(sqlite3.DatabaseError, match=r"^stage cache .*stages\.sqlite: file is not a database$"):
        c2.store_stats()


def test_the_store_round_trips_what_json_can_hold_and_refuses_a_file_as_root(tmp_path: Path) -> None:
    c = StageCache(tmp_path / "a" / "b", memory_entries=0)  # parents created
    lone = "\ud800 half a pair"  # a lone surrogate, in a key and in a payload
    c.put("search", {"q": lone}, {"v": np.float32(0.5), "t": lone, "n": np.arange(2)})
    assert c.get("search", {"q": lone}) == {"v": 0.5, "t": lone, "n": [0, 1]}
    assert c.get("search", {"q": "\ud801 half a pair"}) is None
    c.put("embed", {"q": 1}, "é")  # stored as UTF-8, not escaped: 4 bytes
    assert c.store_stats()["spaces"]["embed"]["bytes"] == 4 + ROW_OVERHEAD
    (tmp_path / "f").write_text("", encoding="utf-8")
    with pytest.raises(NotADirectoryError, match=r"^stage cache .*f: exists and is not a directory$"):
        StageCache(tmp_path / "f")


def test_the_memory_layer_keeps_what_was_read_and_written_up_to_its_size(tmp_path: Path) -> None:
    StageCache(tmp_path, memory_entries=0).put("s", {"i": 0}, [0])
    c = StageCache(tmp_path, memory_entries=2)
    assert c.get("s", {"i": 0}) == [0]  # read from the file: remembered
    c.put("s", {"i": 1}, [1])
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
        conn.execute("DELETE FROM entries")
    assert (c.get("s", {"i": 0}), c.get("s", {"i": 1})) == ([0], [1])  # two entries kept
    c.put("s", {"i": 2}, [2])  # a third: the least recently used one ({i: 0}) goes
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
        conn.execute("DELETE FROM entries")
    assert [c.get("s", {"i": i}) for i in range(3)] == [None, [1], [2]]


def test_the_bound_evicts_the_least_recently_used_entries(tmp_path: Path, monkeypatch) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(blobstore.time, "time", lambda: clock[0])
    row = len(b'"xxxxxxxxxx"') + ROW_OVERHEAD
    c = StageCache(tmp_path, memory_entries=0, max_bytes=5 * row)
    for i in range(5):
        c.put("search", {"i": i}, "x" * 10)
        clock[0] += 120
    assert c.get("search", {"i": 0}) == "x" * 10  # read again: now the most recently used
    clock[0] += 120
    c.put("search", {"i": 5}, "x" * 10)  # 6 rows, over the bound: down to 90 % of it (4.5 rows)
    assert [i for i in range(6) if c.get("search", {"i": i}) is not None] == [0, 3, 4, 5]
    assert c.store_stats()["bytes"] == 4 * row and c.store.evicted == 2


def test_numpy_values_in_keys_and_non_json_rejected(tmp_path: Path) -> None:
    assert canonical_json({"x": np.float32(0.5), "v": np.arange(2)}) == '{"v":[0,1],"x":0.5}'
    with pytest.raises(TypeError, match="cannot put a object"):
        canonical_json({"x": object()})


def _writer(root: str, n: int, barrier: Any) -> None:
    c = StageCache(root, memory_entries=0)
    barrier.wait()
    for i in range(n):
        c.put("s", {"i": i % 5}, {"v": i % 5, "pad": "x" * 20_000})
        assert c.get("s", {"i": (i + 1) % 5}) in (None, {"v": (i + 1) % 5, "pad": "x" * 20_000})


def test_concurrent_writers_never_expose_partial_entries(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 60, barrier)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    c = StageCache(tmp_path, memory_entries=0)
    assert [c.get("s", {"i": i})["v"] for i in range(5)] == list(range(5))
    assert c.entries("s") == 5
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # threads of one process share counters safely
    c2 = StageCache(tmp_path / "t")
    ts = [threading.Thread(target=lambda: [c2.get("s", {"i": 1}) for _ in range(200)]) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert c2.stats()["s"].misses == 800


def test_code_version_hashes_the_stage_import_closure() -> None:
    v = code_version("search")
    assert re.fullmatch(rf"{re.escape(rag_lab.__version__)}\+[0-9a-f]{{12}}", v)
    assert code_version("search") != code_version("rerank")
    with pytest.raises(ValueError, match="unknown stage 'merge'"):
        code_version("merge")
    # the wrapped object's class adds its module: a model defined outside rag_lab counts by its file
    assert code_version_for("rerank", CountingReranker()) != code_version("rerank")
    assert code_version_for("rerank", CountingReranker()) == code_version_for("rerank", CountingReranker())


def test_editing_any_module_in_the_search_closure_changes_the_version(tmp_path: Path) -> None:
    """On a copy of the package: an edit in a module the search imports (even lazily, like
    image_recall) changes the digest; an edit elsewhere (the gate) does not."""
    import shutil

    from rag_lab.eval.cache.keys import STAGE_CODE_ROOTS
    from rag_lab.importgraph import closure_digest, import_closure

    root = tmp_path / "rag_lab"
    shutil.copytree(Path(rag_lab.__file__).parent, root, ignore=shutil.ignore_patterns("__pycache__", "_vendor"))
    roots = STAGE_CODE_ROOTS["search"]
    closure = import_closure(roots, root)
    assert {"rag_lab.retrieval.image_recall", "rag_lab.retrieval.vector_index", "rag_lab.retrieval.fusion"} <= set(
        closure
    )
    before = closure_digest(roots, root)
    assert before == closure_digest(roots)  # the copy hashes like the package
    gate = root / "eval" / "gate" / "compare.py"
    gate.write_text(gate.read_text(encoding="utf-8") + "\n# unrelated\n", encoding="utf-8")
    assert closure_digest(roots, root) == before
    for rel in ("retrieval/image_recall.py", "retrieval/fusion.py", "knowledge/store.py"):
        f = root / rel
        text = f.read_text(encoding="utf-8")
        f.write_text(text + "\n# edited\n", encoding="utf-8")
        assert closure_digest(roots, root) != before, rel
        f.write_text(text, encoding="utf-8")
    assert closure_digest(roots, root) == before


def test_the_installed_package_closure_parses_only_the_closure() -> None:
    """The installed package's closures are read lazily (only the modules reached are parsed) and
    equal the closures over the whole package's edges (:func:`module_edges`): the stage roots',
    the capture's, and every module's (all at once, and one by one for every 7th)."""
    from rag_lab import importgraph
    from rag_lab.eval.cache.keys import STAGE_CODE_ROOTS

    importgraph._edges_of_cached.cache_clear()
    closure = importgraph.import_closure(STAGE_CODE_ROOTS["rerank"])
    assert importgraph._edges_of_cached.cache_info().currsize == len(closure)
    assert "rag_lab.models.base" in closure and "rag_lab.retrieval.engine" not in closure

    edges = importgraph.module_edges()
    modules = importgraph.package_modules()

    def whole_graph_closure(root: str) -> list[str]:
        seen: set[str] = set()
        todo = [root]
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(edges.get(m, {}))
                parent = m.rpartition(".")[0]
                if parent in modules and parent != "rag_lab":
                    todo.append(parent)
        return sorted(seen)

    def whole_graph(roots: tuple[str, ...]) -> list[str]:
        return sorted(set().union(*(whole_graph_closure(r) for r in roots)))

    for roots in (*STAGE_CODE_ROOTS.values(), tuple(modules), *((m,) for m in list(modules)[::7])):
        assert importgraph.import_closure(roots) == whole_graph(roots), roots


def test_the_imports_memo_spares_a_new_process_the_parsing(tmp_path: Path, monkeypatch) -> None:
    """A second process (fresh in-memory caches, the memo file left by the first) parses no module
    and gets the same closure; a damaged or foreign memo file is ignored; an edited source misses."""

    from rag_lab import importgraph
    from rag_lab.eval.cache.keys import STAGE_CODE_ROOTS

    def new_process(memo: Path) -> tuple[list[str], int]:
        monkeypatch.setattr(importgraph, "IMPORTS_MEMO", memo)
        importgraph._memo.cache_clear()
        importgraph._edges_of_cached.cache_clear()
        return importgraph.import_closure(STAGE_CODE_ROOTS["rerank"]), importgraph._memo().parsed

    memo = tmp_path / "pycache" / "imports.json"
    first, parsed = new_process(memo)
    assert parsed == len(first) == 9 and memo.is_file()  # models, base, rerank, timeouts, the embedding package (5)
    assert new_process(memo) == (first, 0)
    data = json.loads(memo.read_text(encoding="utf-8"))
    assert len(data["entries"]) == len(first)
    memo.write_text(json.dumps({**data, "extractor": "other"}), encoding="utf-8")
    assert new_process(memo) == (first, len(first))  # another extractor's file: all parsed again
    memo.write_text("{not json", encoding="utf-8")
    assert new_process(memo) == (first, len(first))
    # a folder that cannot be written: still the right closure, parsed each time
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    assert new_process(blocked / "imports.json") == (first, len(first))
    assert new_process(blocked / "imports.json") == (first, len(first))
    # an edited module misses its entry (its key is its source's hash) and only it is parsed
    target = importgraph.package_modules()["rag_lab.models.base"]
    original = target.read_bytes()
    real_read = Path.read_bytes

    def edited(self: Path) -> bytes:
        return real_read(self) + (b"\n# edited\n" if self == target else b"")

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert new_process(memo) == (first, 1)
    assert new_process(memo) == (first, 0)
    monkeypatch.setattr(Path, "read_bytes", real_read)
    assert target.read_bytes() == original
    assert new_process(memo) == (first, 0)  # the unedited source's entry is still there
    assert len(json.loads(memo.read_text(encoding="utf-8"))["entries"]) == len(first) + 1
    importgraph._memo.cache_clear()
    importgraph._edges_of_cached.cache_clear()


def test_search_key_params_are_the_search_stage_contract() -> None:
    """No hand-kept list: the key holds the contract's params; and the contract covers every
    PipelineParams field the search code reads (``p.`` / ``params.`` attribute reads in the
    retrieval, plugin and searchutil modules of the search closure), image recall included."""
    from rag_lab.eval.cache.keys import STAGE_CODE_ROOTS
    from rag_lab.importgraph import import_closure, package_modules
    from rag_lab.pipeline.contracts import contract_of
    from rag_lab.pipeline.plugins.search import PluginSearch

    assert search_param_fields() == contract_of(PluginSearch).params
    assert search_kb_fields() == contract_of(PluginSearch).kb
    modules = package_modules()
    closure = import_closure(("rag_lab.pipeline.plugins.search", *STAGE_CODE_ROOTS["search"]))
    read: set[str] = set()
    for m in closure:
        if m.startswith(("rag_lab.retrieval", "rag_lab.pipeline.plugins", "rag_lab.searchutil")):
            src = modules[m].read_text(encoding="utf-8")
            read |= set(re.findall(r"\b(?:p|params|self\.params)\.([a-z_0-9]+)\b", src)) & set(
                PipelineParams.model_fields
            )
    assert read <= set(search_param_fields()), sorted(read - set(search_param_fields()))
    assert {"image_vector_threshold", "image_recall_top_k_factor", "image_recall_max_requests", "rrf_k"} <= read


@pytest.mark.slow
def test_image_recall_sweep_with_the_cache_equals_the_uncached_sweep(tmp_path: Path) -> None:
    """Regression: sweeping ``image_vector_threshold`` with the cache on gave every value the first
    value's cached search. Now each value has its own key: results differ between values and equal
    the uncached ones, value by value."""
    from rag_lab.lab.lab import Lab
    from tests.retrieval.joint_embedder import JointHashEmbedder, write_png

    lab = Lab.from_config(workspace=tmp_path / "ws")
    lab.ingest_documents(
        [
            {"id": "bridge", "title": "Bridges", "text": "Suspension bridges hang their deck from steel cables."},
            {"id": "tides", "title": "Tides", "text": "Tides follow the moon."},
        ],
        kb="mixed",
        progress=False,
    )
    lab.image_embedder = JointHashEmbedder()
    pics = tmp_path / "pics"
    pics.mkdir()
    lab.ingest_images(
        [{"path": str(write_png(pics / "red.png", "red bridge river")), "caption": "figure one"}], kb="mixed"
    )
    question = "red bridge"  # cosine 2/sqrt(6) = 0.816 with the picture's words
    values = (0.0, 0.5, 0.99)  # image threshold min(vector 0.9, v): 0, 0.5, 0.9

    def image_hits(run: Any) -> list[tuple[str, float]]:
        snap = run.state("chunk_search_parallel")
        return [(r.id, round(r.score, 6)) for r in snap.state.search_result if r.chunk_type.startswith("image")]

    configs = {v: {"vector_threshold": 0.9, "image_vector_threshold": v} for v in values}
    plain = {v: image_hits(lab.ask(question, kb="mixed", params=p)) for v, p in configs.items()}
    handle = enable_stage_cache(lab, tmp_path / "cache")
    try:
        cached = {v: image_hits(lab.ask(question, kb="mixed", params=p)) for v, p in configs.items()}
        first = handle.stats()["search"]
        again = {v: image_hits(lab.ask(question, kb="mixed", params=p)) for v, p in configs.items()}
        second = handle.stats()["search"]
    finally:
        handle.disable()
    assert cached == plain and again == plain
    assert plain[0.0] and not plain[0.99]  # the threshold decides whether the picture is recalled
    assert first.misses >= len(values) and first.hits == 0  # each value searched on its own
    assert second.misses == first.misses and second.hits == first.misses  # then reused


# --------------------------------------------------------------------------- wrappers


class CountingReranker:
    model_id = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def rerank(self, query: str, passages: list[str]) -> list[Any]:
        from rag_lab.models.base import RerankScore

        self.calls += 1
        return [RerankScore(i, 1.0 / (i + 1)) for i in range(len(passages))]


async def test_caching_reranker_key_is_model_query_and_passages(tmp_path: Path) -> None:
    inner = CountingReranker()
    r = CachingReranker(inner, StageCache(tmp_path))
    a = await r.rerank("q", ["p1", "p2"])
    b = await r.rerank("q", ["p1", "p2"])
    assert (
        [(s.index, s.relevance_score) for s in a] == [(s.index, s.relevance_score) for s in b] == [(0, 1.0), (1, 0.5)]
    )
    await r.rerank("q", ["p2", "p1"])  # order is part of the key
    await r.rerank("q2", ["p1", "p2"])
    inner.model_id = "other"
    await CachingReranker(inner, r.cache).rerank("q", ["p1", "p2"])
    assert inner.calls == 4 and r.model_id == "counting"


def test_caching_embedder_is_bit_exact(tmp_path: Path, embedder: Any) -> None:
    ce = CachingEmbedder(embedder, StageCache(tmp_path))
    first = ce.embed(["alpha beta", "gamma"])
    calls = embedder.calls
    again = ce.embed(["gamma", "alpha beta"])
    assert embedder.calls == calls  # both served from the cache
    assert again.dtype == np.float32 and np.array_equal(again, first[::-1])
    from_disk = CachingEmbedder(embedder, StageCache(tmp_path, memory_entries=0))
    assert np.array_equal(from_disk.embed(["gamma"])[0], first[1]) and embedder.calls == calls
    assert ce.model_key == embedder.model_key and ce.dimension == embedder.dimension


# --------------------------------------------------------------------------- on the lab


def _outputs(result: Any) -> list[tuple[Any, ...]]:
    return [(r.answer, r.context_ids, r.retrieved_doc_ids) for r in result.records]


@pytest.mark.slow
async def test_cached_runs_equal_uncached_and_post_retrieval_sweeps_reuse_search_and_rerank(
    eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Path
) -> None:
    kb = small_spec.kb_name
    configs = [{"rerank_threshold": t, "mmr_lambda": lam} for t in (0.2, 0.5) for lam in (0.5, 0.9)]
    plain = [await evaluate_lab(eval_lab, small_ds, kb, progress=False, params=c) for c in configs]
    handle = enable_stage_cache(eval_lab, tmp_path / "cache")
    try:
        assert enable_stage_cache(eval_lab, tmp_path / "elsewhere") is handle  # idempotent
        cached = [await evaluate_lab(eval_lab, small_ds, kb, progress=False, params=c) for c in configs]
        st = handle.stats()
        n_q = len(small_ds.queries)
        # the first config fills the cache; the three others only read it
        assert st["rerank"].misses == n_q and st["rerank"].hits >= 3 * n_q
        assert st["embed"].misses == n_q and st["embed"].hits == 3 * n_q
        assert st["search"].hits == 3 * st["search"].misses
        for a, b in zip(plain, cached):
            assert _outputs(a) == _outputs(b)
            assert a.summary() == b.summary()
        # a param HybridSearch reads is part of the key: a new search, then reused
        before = handle.stats()["search"].misses
        await evaluate_lab(eval_lab, small_ds, kb, progress=False, params={"rrf_k": 10})
        assert handle.stats()["search"].misses > before
    finally:
        handle.disable()
    assert type(eval_lab.services.searcher).__name__ == "HybridSearcher"
    assert getattr(eval_lab, "_stage_cache_handle", None) is None


@pytest.mark.slow
def test_kb_content_change_invalidates_cached_searches(tmp_path: Path) -> None:
    from rag_lab.eval.cache import KbVersioner
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path / "ws")
    lab.ingest_documents(
        [{"id": "a", "text": "The Brightwater lighthouse was built by Mara Quill."}], kb="k", progress=False
    )
    kb_id = lab.workspace.get_kb("k").id
    handle = enable_stage_cache(lab, tmp_path / "cache")
    try:
        run1 = lab.ask("Who built the lighthouse?", kb="k", snapshots=False)
        v1 = handle.versioner.version(kb_id)
        lab.ask("Who built the lighthouse?", kb="k", snapshots=False)
        hits = handle.stats()["search"].hits
        assert hits >= 1
        lab.ingest_documents(
            [{"id": "b", "text": "Mara Quill also designed the Ember bridge."}], kb="k", progress=False
        )
        v2 = handle.versioner.version(kb_id)
        assert v2 != v1
        misses = handle.stats()["search"].misses
        run3 = lab.ask("Who built the lighthouse?", kb="k", snapshots=False)
        assert handle.stats()["search"].misses > misses  # new content: searched again
        assert {r.knowledge_id for r in run3.references} >= {r.knowledge_id for r in run1.references}
        # the version is content-addressed: another workspace with the same data has the same one
        other = Lab.from_config(workspace=tmp_path / "ws2")
        other.ingest_documents(
            [
                {"id": "a", "text": "The Brightwater lighthouse was built by Mara Quill."},
                {"id": "b", "text": "Mara Quill also designed the Ember bridge."},
            ],
            kb="k",
            progress=False,
        )
        assert KbVersioner(other.workspace.store.path).version(kb_id) == v2
    finally:
        handle.disable()


def test_bm25_index_cache_is_keyed_by_settings(tmp_path: Path) -> None:
    cache = StageCache(tmp_path)
    bm = Bm25IndexCache(cache)
    texts = [
        "the lighthouse keeper",
        "lighthouse lighthouse lamp",
        "sourdough bread",
        "volcano crater lake",
        "chess opening theory",
        "granite headland walk",
    ]
    ids = [f"c{i}" for i in range(1, len(texts) + 1)]
    a = bm.get(ids, texts, k1=1.5, b=0.75)
    b = bm.get(ids, texts, k1=1.5, b=0.75)
    st = cache.stats()["bm25"]
    assert (st.misses, st.hits, st.writes) == (1, 1, 1)
    assert a.scores("lighthouse") == b.scores("lighthouse")
    c = bm.get(ids, texts, k1=0.5, b=0.75)
    d = bm.get(ids, texts, k1=1.5, b=0.75, method="lucene")
    assert cache.stats()["bm25"].misses == 3
    assert c.scores("lighthouse")["c2"] != a.scores("lighthouse")["c2"]  # k1 changes tf saturation
    assert d.params["method"] == "lucene" and a.params["k1"] == 1.5
    key = bm.index_key(ids, texts, k1=1.5, b=0.75, method="robertson")
    assert set(key) >= {"tokenizer", "k1", "b", "method", "corpus"}
    assert bm.index_key(ids, [*texts[:5], "rye bread"], k1=1.5, b=0.75, method="robertson")["corpus"] != key["corpus"]


def test_memory_layer_and_the_entry_count(tmp_path: Path) -> None:
    """An entry kept in memory is served after its row is gone (and parsed afresh each time);
    ``entries`` counts the rows per stage."""
    c = StageCache(tmp_path, memory_entries=2)
    key = {"q": "é"}
    c.put("embed", key, {"v": [1]})
    with sqlite3.connect(tmp_path / "stages.sqlite") as conn:
        conn.execute("DELETE FROM entries")
    got = c.get("embed", key)
    assert got == {"v": [1]}
    got["v"].append(2)
    assert c.get("embed", key) == {"v": [1]}  # a fresh object: the caller's change is not kept
    assert c.stats()["embed"].hits == 2
    c.put("embed", {"q": 2}, [2])
    c.put("embed", {"q": 3}, [3])  # two entries in memory at most: the first one is gone now
    assert c.get("embed", key) is None
    st = c.stats()["embed"]
    assert (st.hits, st.misses, st.errors, st.writes) == (2, 1, 0, 3)
    c.put("rerank", key, [0])
    counts = (c.entries(), c.entries("embed"), c.entries("rerank"), c.entries("search"))
    assert counts == (3, 2, 1, 0)  # embed: {q: 2} and {q: 3}
    assert repr(c) == f"StageCache({str(tmp_path)!r})"
