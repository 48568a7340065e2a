from __future__ import annotations

import numpy as np
import pytest

from rag_lab.retrieval.vector_index import VectorIndex, VectorIndexError


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
    idx.add(["faq1", "faq1", "doc"], np.stack([_unit(1, 0), _unit(0, 1), _unit(1, 1)]),
            entry_ids=["faq1#q0", "faq1#q1", "doc"], texts=["question zero", "question one", None])
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
