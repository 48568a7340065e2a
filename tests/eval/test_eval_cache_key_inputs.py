"""What the stage cache's keys must change with (issue 23): the vector index policy in the search
key (an HNSW graph answers differently from the flat scan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.cache import enable_stage_cache
from rag_lab.eval.cache.wrappers import CachingSearcher
from rag_lab.retrieval.base import SearchParams
from rag_lab.retrieval.vector_index import IndexPolicy, VectorIndex


def _search_key(ws: Path, cache: Path) -> tuple[dict[str, Any], Any, Any]:
    """The key of one search on the KB ``k`` of the workspace, with the lab and its handle."""
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=ws)
    if "k" not in {kb.name for kb in lab.workspace.list_kbs()}:
        lab.ingest_documents([{"id": "a", "text": "The lighthouse was built by Mara Quill."}], kb="k", progress=False)
    handle = enable_stage_cache(lab, cache)
    searcher = lab.services.searcher
    assert isinstance(searcher, CachingSearcher)
    kb = lab.workspace.get_kb("k")
    sp = SearchParams(query_text="who built the lighthouse", match_count=5, knowledge_base_ids=[kb.id])
    key = searcher.search_key(kb.id, sp)
    assert key is not None
    return key, lab, handle


def test_the_search_key_follows_the_loaded_index_policy(tmp_path: Path) -> None:
    key, lab, handle = _search_key(tmp_path / "ws", tmp_path / "cache")
    try:
        kb = lab.workspace.get_kb("k")
        searcher = lab.services.searcher
        sp = SearchParams(query_text="who built the lighthouse", match_count=5, knowledge_base_ids=[kb.id])
        assert key["kbs"][kb.id]["vector_index"] == {
            "ann_min_vectors": 0,
            "quantized_min_vectors": 20_000,
            "quantized_candidates": 4,
            "quantized_shards": 0,
            "hnsw_m": 32,
            "hnsw_ef_construction": 200,
            "hnsw_ef_search": 256,
            "max_tombstone_fraction": 0.1,
        }
        assert searcher.search_key(kb.id, sp) == key  # same policy, same key
        idx = lab.workspace.vector_index(kb)
        assert idx is not None
        idx.policy = IndexPolicy(ann_min_vectors=1)
        hnsw = searcher.search_key(kb.id, sp)
        idx.policy = IndexPolicy(ann_min_vectors=1, hnsw_ef_search=64)
        narrower = searcher.search_key(kb.id, sp)
        assert len({repr(k) for k in (key, hnsw, narrower)}) == 3  # two policies, two keys
        idx.policy = IndexPolicy()
        assert searcher.search_key(kb.id, sp) == key
    finally:
        handle.disable()
        lab.workspace.close()


def test_the_search_key_follows_the_policy_a_load_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the KB's index is loaded, the key holds the policy loading gives it."""
    first, lab, handle = _search_key(tmp_path / "ws", tmp_path / "cache")
    handle.disable()
    lab.workspace.close()
    again, lab, handle = _search_key(tmp_path / "ws", tmp_path / "cache")  # a new process, say
    handle.disable()
    lab.workspace.close()
    assert again == first
    monkeypatch.setattr(VectorIndex, "default_policy", IndexPolicy(ann_min_vectors=1))
    hnsw, lab, handle = _search_key(tmp_path / "ws", tmp_path / "cache")
    handle.disable()
    lab.workspace.close()
    assert hnsw != first and next(iter(hnsw["kbs"].values()))["vector_index"]["ann_min_vectors"] == 1
