from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.retrieval.vector_index import VectorIndex, VectorIndexError
from rag_lab.retrieval.versioned import current_dir


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_cosine_scores_threshold_and_order():
    idx = VectorIndex(3)
    idx.add(["a", "b", "c"], np.stack([_unit(1, 0, 0), _unit(1, 1, 0), _unit(0, 0, 1)]))
    hits = idx.search(_unit(1, 0, 0), 3)
    assert [h[0] for h in hits] == ["a", "b", "c"]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-6)
    assert hits[1][1] == pytest.approx(1 / np.sqrt(2), abs=1e-6)
    assert hits[2][1] == pytest.approx(0.0, abs=1e-6)
    assert [h[0] for h in idx.search(_unit(1, 0, 0), 3, threshold=0.5)] == ["a", "b"]
    # score >= threshold is inclusive
    exact = hits[1][1]
    assert [h[0] for h in idx.search(_unit(1, 0, 0), 3, threshold=exact)] == ["a", "b"]
    assert idx.search(_unit(1, 0, 0), 0) == []


def test_ties_broken_by_chunk_id_across_the_cut():
    idx = VectorIndex(2)
    ids = [f"c{i:02d}" for i in range(40)]
    rng = np.random.default_rng(0)
    order = rng.permutation(40)
    vecs = np.stack([_unit(1, 1)] * 40)
    idx.add([ids[i] for i in order], vecs)
    hits = idx.search(_unit(1, 1), 5)
    assert [h[0] for h in hits] == ids[:5]


def test_allowed_ids_remove_and_replace():
    idx = VectorIndex(2)
    idx.add(["a", "b", "c"], np.stack([_unit(1, 0), _unit(0.9, 0.1), _unit(0, 1)]))
    assert [h[0] for h in idx.search(_unit(1, 0), 3, allowed_ids={"b", "c", "zz"})] == ["b", "c"]
    assert idx.search(_unit(1, 0), 3, allowed_ids=set()) == []
    assert idx.remove_chunks(["a"]) == 1 and len(idx) == 2
    assert idx.search(_unit(1, 0), 1)[0][0] == "b"
    idx.add(["c"], _unit(1, 0).reshape(1, -1))  # same entry id: replaced, not duplicated
    assert len(idx) == 2 and idx.search(_unit(1, 0), 1)[0][0] == "c"


def test_faq_entries_map_to_their_chunk():
    idx = VectorIndex(2)
    idx.add(
        ["faq1", "faq1", "doc"],
        np.stack([_unit(1, 0), _unit(0, 1), _unit(1, 1)]),
        entry_ids=["faq1#q0", "faq1#q1", "doc"],
        texts=["question zero", "question one", None],
    )
    (entry, score), *_ = idx.search_entries(_unit(0, 1), 1)
    assert entry.entry_id == "faq1#q1" and entry.chunk_id == "faq1" and entry.text == "question one"
    assert idx.remove_chunks(["faq1"]) == 2 and idx.chunk_ids() == {"doc"}


def test_persistence(tmp_path):
    idx = VectorIndex(4, tmp_path / "v")
    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(20, 4)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx.add([f"x{i}" for i in range(20)], vecs)
    idx.remove_chunks(["x3"])
    idx.save()
    again = VectorIndex.load(tmp_path / "v", 4)
    q = vecs[5]
    assert again.search(q, 6) == idx.search(q, 6)
    assert again.search(q, 1)[0][0] == "x5"
    again.add(["new"], q.reshape(1, -1))  # ids keep counting after reload
    assert len(again) == 20
    with pytest.raises(VectorIndexError, match="does not match the KB's embedding dimension 8"):
        VectorIndex.load(tmp_path / "v", 8)


def test_bad_vectors():
    idx = VectorIndex(3)
    with pytest.raises(VectorIndexError, match=r"expected \(n, 3\)"):
        idx.add(["a"], np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(VectorIndexError, match="NaN"):
        idx.add(["a"], np.array([[np.nan, 0, 0]], dtype=np.float32))
    with pytest.raises(VectorIndexError, match="2 vectors for 1 ids"):
        idx.add(["a"], np.zeros((2, 3), dtype=np.float32))
    assert idx.search(_unit(1, 0, 0), 3) == []


# -- index choice by size (flat below the threshold, HNSW above) -------------------------------

from rag_lab.retrieval.vector_index import IndexPolicy  # noqa: E402


def _clustered(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    """Unit vectors around 8 centres: a low intrinsic dimension, like sentence embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, d))
    x = centres[rng.integers(0, 8, n)] + 0.35 * rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def test_policy_picks_flat_below_and_hnsw_from_the_threshold():
    pol = IndexPolicy(ann_min_vectors=100)
    assert pol.kind_for(99) == "flat" and pol.kind_for(100) == "hnsw"
    assert IndexPolicy(ann_min_vectors=0, quantized_min_vectors=0).kind_for(10**9) == "flat"  # 0 = never
    assert IndexPolicy().kind_for(19_999) == "flat" and IndexPolicy().kind_for(20_000) == "sq8"  # the defaults
    idx = VectorIndex(16, policy=pol)
    x = _clustered(150)
    idx.add([f"c{i:03d}" for i in range(99)], x[:99])
    assert idx.kind == "flat"
    idx.search(x[0], 5)
    assert idx.ann_info()["graph_vectors"] == 0  # no graph below the threshold
    idx.add([f"c{i:03d}" for i in range(99, 150)], x[99:])
    assert idx.kind == "hnsw"
    idx.search(x[0], 5)
    info = idx.ann_info()
    assert info["graph_vectors"] == 150 and info["m"] == 32 and info["tombstones"] == 0


def test_hnsw_scores_are_exact_cosines_and_recall_matches_the_flat_scan():
    x = _clustered(2000, seed=3)
    ids = [f"c{i:04d}" for i in range(2000)]
    idx = VectorIndex(16, policy=IndexPolicy(ann_min_vectors=1000, hnsw_ef_search=64))
    idx.add(ids, x)
    rng = np.random.default_rng(7)
    overlap = []
    for qi in rng.integers(0, 2000, 30):
        q = x[qi]
        approx = idx.search(q, 10)
        exact = idx.search(q, 10, exact=True)
        for cid, s in approx:  # every returned score is the true cosine
            assert s == pytest.approx(float(x[ids.index(cid)] @ q), abs=1e-5)
        assert [s for _, s in approx] == sorted((s for _, s in approx), reverse=True)
        overlap.append(len({c for c, _ in approx} & {c for c, _ in exact}) / 10)
    assert idx.ann_info()["graph_vectors"] == 2000
    assert np.mean(overlap) >= 0.98


def test_hnsw_threshold_is_inclusive_and_allowed_ids_scan_exactly():
    x = _clustered(300, seed=5)
    ids = [f"c{i:03d}" for i in range(300)]
    idx = VectorIndex(16, policy=IndexPolicy(ann_min_vectors=10))
    idx.add(ids, x)
    q = x[0]
    top = idx.search(q, 5)
    cut = top[2][1]
    assert [c for c, _ in idx.search(q, 5, threshold=cut)] == [c for c, _ in top[:3]]
    assert idx.search(q, 5, threshold=1.01) == []
    allowed = {"c150", "c151", "c299"}
    want = sorted(((c, float(x[ids.index(c)] @ q)) for c in allowed), key=lambda h: (-h[1], h[0]))
    got = idx.search(q, 5, allowed_ids=allowed)
    assert [c for c, _ in got] == [c for c, _ in want]


def test_hnsw_removals_are_tombstoned_then_the_graph_is_rebuilt():
    x = _clustered(200, seed=9)
    ids = [f"c{i:03d}" for i in range(200)]
    idx = VectorIndex(16, policy=IndexPolicy(ann_min_vectors=50, max_tombstone_fraction=0.1))
    idx.add(ids, x)
    assert idx.search(x[0], 1)[0][0] == "c000"
    assert idx.remove_chunks(["c000"]) == 1
    assert "c000" not in [c for c, _ in idx.search(x[0], 20)]
    assert idx.ann_info()["tombstones"] == 1 and idx.ann_info()["graph_vectors"] == 200
    # replacing an entry tombstones the old vector and appends the new one
    idx.add(["c001"], x[0].reshape(1, -1))
    assert idx.search(x[0], 1)[0] == ("c001", pytest.approx(1.0, abs=1e-5))
    assert idx.ann_info()["tombstones"] == 2 and idx.ann_info()["graph_vectors"] == 201
    idx.remove_chunks([f"c{i:03d}" for i in range(2, 30)])  # 30 dead > 10% of 201 → rebuild
    hits = idx.search(x[5], 10)
    assert all(int(c[1:]) >= 30 or c == "c001" for c, _ in hits)
    assert idx.ann_info()["tombstones"] == 0
    assert idx.ann_info()["graph_vectors"] == len(idx) == 171


def test_hnsw_graph_is_persisted_and_reloaded_without_a_rebuild(tmp_path, monkeypatch):
    x = _clustered(120, seed=11)
    ids = [f"c{i:03d}" for i in range(120)]
    pol = IndexPolicy(ann_min_vectors=100)
    idx = VectorIndex(16, tmp_path / "v", policy=pol)
    idx.add(ids, x)
    idx.search(x[0], 1)  # builds the graph
    idx.remove_chunks(["c007"])  # tombstoned in it
    idx.save()
    live = current_dir(tmp_path / "v")[0]
    assert (live / "vectors.hnsw").exists() and (live / "ann.json").exists()
    before = [idx.search(x[i], 5) for i in range(0, 120, 17)]

    def no_rebuild(self):
        raise AssertionError("the persisted graph should have been reused")

    monkeypatch.setattr(VectorIndex, "_build_graph", no_rebuild)
    again = VectorIndex.load(tmp_path / "v", 16, policy=pol)
    assert [again.search(x[i], 5) for i in range(0, 120, 17)] == before
    assert again.ann_info()["tombstones"] == 1
    monkeypatch.undo()
    # a damaged graph file is derived data: rebuilt from the flat index, same answers
    (current_dir(tmp_path / "v")[0] / "ann.json").write_text("{not json", encoding="utf-8")
    rebuilt = VectorIndex.load(tmp_path / "v", 16, policy=pol)
    assert [c for c, _ in rebuilt.search(x[0], 5)] == [c for c, _ in idx.search(x[0], 5)]
    # a KB that shrinks below the threshold drops its graph files at the next save
    rebuilt.remove_chunks(ids[:60])
    rebuilt.save()
    assert rebuilt.kind == "flat" and not (current_dir(tmp_path / "v")[0] / "vectors.hnsw").exists()


def test_policy_change_rebuilds_with_new_settings_and_bad_settings_are_named():
    x = _clustered(100, seed=2)
    idx = VectorIndex(16, policy=IndexPolicy(ann_min_vectors=10, hnsw_m=8))
    idx.add([f"c{i}" for i in range(100)], x)
    idx.search(x[0], 3)
    assert idx.ann_info()["m"] == 8
    idx.policy = IndexPolicy(ann_min_vectors=10, hnsw_m=24)
    idx.search(x[0], 3)
    assert idx.ann_info()["m"] == 24
    with pytest.raises(VectorIndexError, match=r"IndexPolicy.hnsw_m=1 must be in \[2, 512\]"):
        IndexPolicy(hnsw_m=1)
    with pytest.raises(VectorIndexError, match=r"max_tombstone_fraction=0.0 must be in \(0, 1\]"):
        IndexPolicy(max_tombstone_fraction=0.0)
    with pytest.raises(VectorIndexError, match="web.yaml: unknown key.*ef_serch"):
        IndexPolicy.from_mapping({"ef_serch": 3}, source="web.yaml")
    assert IndexPolicy.from_mapping({"hnsw_ef_search": 200}).hnsw_ef_search == 200


@settings(max_examples=40)
@given(
    n=st.integers(1, 60),
    top_k=st.integers(1, 12),
    threshold=st.floats(-1.0, 1.0),
    seed=st.integers(0, 10_000),
)
def test_graph_and_flat_paths_obey_the_same_contract(n, top_k, threshold, seed):
    """Both paths: at most top_k hits, all >= threshold, sorted by (-score, entry id), each
    score the true cosine; on these tiny sets the graph finds exactly what the scan finds."""
    x = _clustered(n, d=8, seed=seed)
    ids = [f"e{i:02d}" for i in range(n)]
    q = x[seed % n]
    flat = VectorIndex(8, policy=IndexPolicy(ann_min_vectors=0))
    graph = VectorIndex(8, policy=IndexPolicy(ann_min_vectors=1, hnsw_ef_search=64))
    for idx in (flat, graph):
        idx.add(ids, x)
    results = []
    for idx in (flat, graph):
        hits = idx.search(q, top_k, threshold)
        assert len(hits) <= top_k and all(s >= threshold for _, s in hits)
        assert hits == sorted(hits, key=lambda h: (-h[1], h[0]))
        for c, s in hits:
            assert s == pytest.approx(float(x[ids.index(c)] @ q), abs=1e-5)
        results.append([c for c, _ in hits])
    assert graph.kind == "hnsw" and flat.kind == "flat"
    assert results[0] == results[1]


# -- the 8-bit pre-scan with exact re-scoring (kind "sq8") ----------------------------------------


def _pair(x: np.ndarray, ids: list[str], shards: int = 0) -> tuple[VectorIndex, VectorIndex]:
    sq = VectorIndex(x.shape[1], policy=IndexPolicy(quantized_min_vectors=1, quantized_shards=shards))
    flat = VectorIndex(x.shape[1], policy=IndexPolicy(quantized_min_vectors=0))
    sq.add(ids, x)
    flat.add(ids, x)
    return sq, flat


@pytest.mark.parametrize("shards", [1, 3])
def test_quantized_search_returns_the_flat_scan_exactly(shards: int) -> None:
    x = _clustered(3000, d=32, seed=5)
    x[1000:1100] = x[:100]  # exact duplicates: tied scores, broken by id on both paths
    ids = [f"c{i:04d}" for i in range(3000)]
    sq, flat = _pair(x, ids, shards)
    assert sq.kind == "sq8" and flat.kind == "flat"
    rng = np.random.default_rng(1)
    for q in [x[0], x[1500], *rng.normal(size=(40, 32)).astype(np.float32)]:
        for top_k, thr in ((1, -1.0), (10, -1.0), (30, 0.2), (150, 0.2), (3000, -1.0)):
            assert sq.search(q, top_k, thr) == flat.search(q, top_k, thr)
    assert sq._quantized is not None and len(sq._quantized.parts) == shards
    st = sq.quantized_stats  # the 8-bit path answered (the last top_k = n goes to the flat scan)
    assert st["queries"] == 42 * 5 and st["rescans"] + st["flat_fallbacks"] < st["queries"]
    assert flat.quantized_stats["queries"] == 0


@given(
    n=st.integers(1, 300),
    top_k=st.integers(1, 40),
    dup=st.integers(0, 30),
    shards=st.integers(1, 4),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=40)
def test_quantized_equals_flat_on_random_corpora(n: int, top_k: int, dup: int, shards: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype(np.float32)
    x[: min(dup, n)] = x[0]  # ties
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sq, flat = _pair(x, [f"c{i:03d}" for i in range(n)], shards)
    q = rng.normal(size=8).astype(np.float32)
    assert sq.search(q, top_k) == flat.search(q, top_k)
    assert sq.search(x[0], top_k, 0.5) == flat.search(x[0], top_k, 0.5)


@given(
    n=st.integers(1, 400),
    top_k=st.integers(1, 60),
    thresholds=st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=24),
    shards=st.integers(1, 3),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=30)
def test_quantized_equals_flat_under_thresholds_as_the_first_scan_adapts(
    n: int, top_k: int, thresholds: list[float], shards: int, seed: int
) -> None:
    """A run of queries on one index (after 8 the first scan's candidate count follows them): at
    any threshold, the same entries and scores as the flat scan, ties included."""
    x = _clustered(n, d=8, seed=seed)
    x[: min(5, n)] = x[0]  # tied scores
    sq, flat = _pair(x, [f"c{i:03d}" for i in range(n)], shards)
    rng = np.random.default_rng(seed)
    for i, thr in enumerate(thresholds):
        q = x[i % n] if i % 3 == 0 else rng.normal(size=8).astype(np.float32)
        assert sq.search(q, top_k, thr) == flat.search(q, top_k, thr)


def test_quantized_first_scan_shrinks_when_the_threshold_cuts_and_the_results_stay_exact() -> None:
    """150 results asked at a threshold only a few dozen vectors pass: after 8 queries the first
    scan fetches fewer than 4 candidates per result, and the answers still equal the flat scan's."""
    x = _clustered(6000, d=32, seed=3)
    sq, flat = _pair(x, [f"c{i:04d}" for i in range(6000)], 2)
    rng = np.random.default_rng(4)
    before = sq._first_candidates(150)
    for q in rng.normal(size=(20, 32)).astype(np.float32):
        q /= np.linalg.norm(q)
        cut = float(np.sort(x @ q)[-40])  # 40 vectors pass
        assert sq.search(q, 150, cut) == flat.search(q, 150, cut)
    assert before == 600 and sq._first_candidates(150) < 600
    assert sq.quantized_stats["rescans"] + sq.quantized_stats["flat_fallbacks"] <= 2


def test_quantized_scan_widens_when_vectors_outside_may_pass_the_threshold() -> None:
    """150 vectors pass the threshold by less than the 8-bit error and 2,000 miss it by as little:
    once earlier queries shrank the first scan to 264 candidates, some that pass lie outside them,
    and the check must widen the scan."""
    rng = np.random.default_rng(11)
    d, q = 32, np.eye(32, dtype=np.float32)[0]
    s = np.concatenate(
        [rng.uniform(0.3001, 0.3005, 150), rng.uniform(0.2995, 0.2999, 2000), rng.uniform(-0.2, 0.1, 3000)]
    )
    noise = rng.normal(size=(s.size, d))
    noise[:, 0] = 0.0
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    x = (s[:, None] * q + np.sqrt(1.0 - s**2)[:, None] * noise).astype(np.float32)
    sq, flat = _pair(x, [f"c{i:04d}" for i in range(s.size)], 1)
    for _ in range(10):  # nothing passes 0.9: the check needs one candidate
        assert sq.search(q, 200, 0.9) == []
    assert sq._first_candidates(200) == 264  # the floor: 64 more than asked
    got = sq.search(q, 200, 0.3)
    assert got == flat.search(q, 200, 0.3) and len(got) == 150
    assert sq.quantized_stats["rescans"] >= 1


def test_quantized_copy_follows_adds_and_removals() -> None:
    x = _clustered(400, seed=7)
    sq, flat = _pair(x[:300], [f"c{i:03d}" for i in range(300)])
    sq.search(x[0], 5)
    assert sq._quantized is not None
    for idx in (sq, flat):
        idx.add([f"c{i:03d}" for i in range(300, 400)], x[300:])
        idx.remove_chunks(["c000", "c350"])
    assert sq._quantized is None  # dropped on change, rebuilt on the next query
    for q in (x[0], x[350], x[123]):
        got = sq.search(q, 20)
        assert got == flat.search(q, 20) and "c000" not in dict(got) and "c350" not in dict(got)
    # restricted queries scan the flat index: the same answer
    assert sq.search(x[5], 5, allowed_ids={"c005", "c006"}) == flat.search(x[5], 5, allowed_ids={"c005", "c006"})


def test_quantized_policy_values_are_checked() -> None:
    with pytest.raises(VectorIndexError, match="quantized_candidates"):
        IndexPolicy(quantized_candidates=0)
    with pytest.raises(VectorIndexError, match="quantized_min_vectors"):
        IndexPolicy(quantized_min_vectors=-1)


@given(
    n=st.integers(1, 200),
    d=st.integers(1, 48),
    scale=st.sampled_from([1e-6, 1e-3, 1.0, 30.0]),
    constant_dims=st.integers(0, 3),
    shards=st.integers(1, 3),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=60)
def test_quantized_bound_holds_for_every_vector(
    n: int, d: int, scale: float, constant_dims: int, shards: int, seed: int
) -> None:
    """The 8-bit scan's premise: every vector's exact score lies within ``bound`` of
    ``K + alpha · A`` (the integer kernel's score mapped back), whatever the ranges: tiny or wide
    coordinates, constant dimensions, skewed queries."""
    import faiss

    from rag_lab.retrieval.vector_index import _Quantized

    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(n, d)) * rng.uniform(0.01, 1.0, size=d) * scale).astype(np.float32)
    x[:, : min(constant_dims, d)] = np.float32(0.25 * scale)
    idx = faiss.IndexIDMap2(faiss.IndexFlatIP(d))
    idx.add_with_ids(x, np.arange(n, dtype=np.int64))
    qz = _Quantized.build(faiss, idx, d, block=64, shards=shards)  # several blocks, parts across them
    q = (rng.normal(size=(1, d)) * rng.uniform(0.0, 2.0, size=d)).astype(np.float32)
    approx, pos, const, alpha, bound = qz.scan(q, n)
    exact = x.astype(np.float64) @ q[0].astype(np.float64)
    mapped = const + alpha * approx.astype(np.float64)
    assert sorted(pos.tolist()) == list(range(n))
    assert np.all(np.abs(exact[pos] - mapped) <= bound), (np.abs(exact[pos] - mapped).max(), bound)
    # the integer scan orders by A exactly: A is non-increasing along the returned positions
    assert np.all(np.diff(approx) <= 0)
    one_thread = qz.scan(q, n, parallel=False)  # the parts one after the other: the same lists
    assert np.array_equal(one_thread[0], approx) and np.array_equal(one_thread[1], pos)


def test_quantized_parts_follow_the_policy() -> None:
    """Automatic parts: one below 40,000 vectors, one per core (at most 4) from there on; a set
    count is capped by the vector count; changing it rebuilds the copy at the next query."""
    import os

    auto = IndexPolicy()
    assert auto.shards_for(39_999) == 1
    assert auto.shards_for(100_000) == max(1, min(4, os.cpu_count() or 1))
    assert IndexPolicy(quantized_min_vectors=50_000).shards_for(60_000) == 1  # below 2x the threshold
    assert IndexPolicy(quantized_shards=3).shards_for(2) == 2
    with pytest.raises(VectorIndexError, match="quantized_shards"):
        IndexPolicy(quantized_shards=-1)
    x = _clustered(500, seed=3)
    sq, flat = _pair(x, [f"c{i:03d}" for i in range(500)], shards=2)
    assert sq.search(x[7], 10) == flat.search(x[7], 10)
    assert sq._quantized is not None and [p.ntotal for p in sq._quantized.parts] == [250, 250]
    sq.policy = IndexPolicy(quantized_min_vectors=1, quantized_shards=3)
    assert sq.search(x[7], 10) == flat.search(x[7], 10)
    assert [p.ntotal for p in sq._quantized.parts] == [166, 167, 167]


def test_quantized_parts_scan_in_a_forked_child() -> None:
    """The parts' worker threads do not survive a fork: a child process gets its own pool instead
    of waiting forever on its parent's."""
    import os
    import signal

    x = _clustered(400, seed=4)
    sq, flat = _pair(x, [f"c{i:03d}" for i in range(400)], shards=2)
    expected = flat.search(x[3], 5)
    assert sq.search(x[3], 5) == expected  # the pool exists in this process now
    pid = os.fork()
    if pid == 0:  # the child: killed by the alarm if it hangs
        signal.alarm(30)
        try:
            os._exit(0 if sq.search(x[3], 5) == expected else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
