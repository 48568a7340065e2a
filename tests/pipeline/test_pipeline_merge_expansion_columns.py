"""CHUNK_MERGE's neighbour expansion reads only the columns it needs when the store offers them
(``get_chunk_columns``): the merged contexts and the decisions logged equal those of the same
merge through ``get_chunks`` (the full chunks), on chains of short chunks across documents."""

from __future__ import annotations

import random

import pytest

from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.knowledge.store import KnowledgeStore
from rag_lab.pipeline.plugins.merge import merge_results
from rag_lab.types import PipelineParams, SearchResult


class _FullChunksOnly:
    """The store as the tuning evaluator's memo sees it: ``get_chunks`` only."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store

    def get_chunks(self, ids):
        return self.store.get_chunks(ids)


@pytest.fixture
def store(tmp_path):
    s = KnowledgeStore(tmp_path / "s.sqlite")
    s.create_kb(KnowledgeBase(id="kb", name="kb"))
    rng = random.Random(3)
    words = "harbour light keeper storm tide rope bell north quay lamp".split()
    for d in range(3):
        s.add_knowledge(Knowledge(id=f"d{d}", knowledge_base_id="kb", title=f"doc {d}"))
        n = 9
        s.add_chunks(
            Chunk(
                id=f"d{d}-{i}",
                knowledge_id=f"d{d}",
                knowledge_base_id="kb",
                content=" ".join(rng.choice(words) for _ in range(rng.randint(3, 40))),
                chunk_index=i,
                # a link across documents now and then: expansion must stop there
                pre_chunk_id=f"d{d}-{i - 1}" if i else (f"d{(d + 1) % 3}-8" if d == 1 else ""),
                next_chunk_id=f"d{d}-{i + 1}" if i < n - 1 else "",
                metadata={"note": "json decoded by get_chunks"},
            )
            for i in range(n)
        )
    yield s
    s.close()


@pytest.mark.parametrize("seed", range(12))
def test_expansion_through_columns_equals_expansion_through_full_chunks(store, seed: int) -> None:
    rng = random.Random(seed)
    params = PipelineParams(expansion_min_len=rng.choice([300, 350, 600]), expansion_max_len=rng.choice([120, 850]))
    ids = rng.sample([f"d{d}-{i}" for d in range(3) for i in range(9)], 8)
    chunks = store.get_chunks(ids)
    results = [
        SearchResult(
            id=c.id,
            knowledge_id=c.knowledge_id,
            content=c.content,
            chunk_index=c.chunk_index,
            score=rng.random(),
        )
        for c in (chunks[i] for i in ids)
    ]
    log_columns: list[dict] = []
    log_full: list[dict] = []
    got = merge_results([r.copy() for r in results], [], "q", params, store, log_columns)
    want = merge_results([r.copy() for r in results], [], "q", params, _FullChunksOnly(store), log_full)
    assert [r.to_dict() for r in got] == [r.to_dict() for r in want]
    assert log_columns == log_full
    assert any(step["step"] == "expand" for step in log_full)  # the case exercises expansion
