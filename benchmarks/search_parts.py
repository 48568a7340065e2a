"""What rag_lab's hybrid search spends beyond scoring: the same search with its per-search work
switched off one part after another, each step timed against bm25s + numpy in the same pass.

Usage: .venv/bin/python benchmarks/search_parts.py [SIZE] [QUERIES] [PASSES]   (default 1000 300 7)

The corpus, queries and both stacks are :mod:`benchmarks.search`'s (synthetic topic documents, the
light setting: pool 50, top 10). Each step keeps the previous ones switched off:

1. as is;
2. without the indexes' freshness check (the ``os.stat`` of each index's version pointer, which
   sees another process' save);
3. without reading the store's change token (which sees another process' writes);
4. without the per-hit check that the chunk is still enabled and indexed;
5. without hydration: the fused hits are returned as they are, not as ``SearchResult`` objects
   with their document's fields.

Steps 2-5 remove work that keeps results right, so they are measurements, not settings. Printed
per step: the median over ``PASSES`` of the per-query time of each stack and their ratio.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as benchmarks/search.py: one query at a time
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search import (  # noqa: E402
    Bm25sNumpyStack,
    Fusion,
    RagLabStack,
    build_corpus,
    settings_for,
    synthetic_corpus,
)


def main(size: int = 1000, n_queries: int = 300, passes: int = 7) -> None:
    import rag_lab.knowledge.index_cache as index_cache
    import rag_lab.knowledge.store_db as store_db
    import rag_lab.retrieval.engine as engine
    import rag_lab.retrieval.hybrid_search as hybrid_search
    from rag_lab.types.params import PipelineParams

    params = PipelineParams()
    with tempfile.TemporaryDirectory() as tmp:
        emb, docs, queries = synthetic_corpus(size, n_queries)
        c = build_corpus(f"synthetic-{size}", Path(tmp), emb, docs, queries)
        st = settings_for(params)[0]
        ours = RagLabStack(c, params, st.threshold, st.top_k)
        simple = Bm25sNumpyStack(c, st.pool, Fusion(params, st.top_k), st.threshold)
        pairs = list(zip(c.queries, c.query_vectors, strict=True))

        async def ours_pass() -> None:
            for q, v in pairs:
                await ours.search(q, v)

        def simple_pass() -> None:
            for q, v in pairs:
                simple.search(q, v)

        def step(label: str) -> None:
            asyncio.run(ours_pass())
            simple_pass()
            a, b = [], []
            for _ in range(passes):
                t0 = time.perf_counter()
                asyncio.run(ours_pass())
                a.append((time.perf_counter() - t0) / len(pairs) * 1e6)
                t0 = time.perf_counter()
                simple_pass()
                b.append((time.perf_counter() - t0) / len(pairs) * 1e6)
            ma, mb = statistics.median(a), statistics.median(b)
            print(f"{label:44s} rag_lab {ma:6.0f} µs   bm25s + numpy {mb:6.0f} µs   ratio {ma / mb:.2f}", flush=True)

        print(f"{size:,} synthetic chunks, {len(pairs)} queries, median of {passes} passes")
        step("as is")
        index_cache.IndexCache._drop_stale = lambda self, kb_id, vector=True, keyword=True: None
        step("- index freshness")
        token = c.ws.store.change_token()
        store_db.StoreDB.change_token = lambda self: token
        step("- store change token")
        engine.searchable_fields = lambda enabled, chunk_type, status: True
        step("- per-hit searchable check")
        hybrid_search.HybridSearcher._hydrate = lambda self, ranked, trace: [h for h, _ in ranked]
        step("- hydration (fused hits as they are)")
        c.ws.close()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
