"""Post-retrieval cost per query on 200 candidates: composite scoring + MMR + merge + top-K,
and the inverted-index MMR against a naive O(n²·k) MMR, measured side by side.

Usage: .venv/bin/python benchmarks/post_retrieval.py [QUERIES] [K]

Candidates are real HotpotQA passages (200 per query, drawn deterministically) with synthetic
search and rerank scores, so the timing covers the pipeline's own code, not a model.
"""

from __future__ import annotations

import random
import sys
import time

from rag_lab.eval.datasets import load_dataset
from rag_lab.models.base import RerankScore
from rag_lab.pipeline.plugins.filter_top_k import sort_search_results_deterministically
from rag_lab.pipeline.plugins.merge import group_and_merge
from rag_lab.pipeline.plugins.rerank import filter_by_threshold, score_reranked
from rag_lab.reranking.mmr import mmr_token_sets, select_mmr
from rag_lab.searchutil.dedup import remove_duplicate_results, remove_partial_overlaps
from rag_lab.searchutil.text import jaccard
from rag_lab.types import PipelineParams, SearchResult


def naive_mmr(scores: list[float], tokens: list[set[str]], k: int, lam: float) -> list[int]:
    selected: list[int] = []
    while len(selected) < min(k, len(scores)):
        best, best_i = float("-inf"), -1
        for i in range(len(scores)):
            if i in selected:
                continue
            red = max((jaccard(tokens[i], tokens[j]) for j in selected), default=0.0)
            v = lam * scores[i] - (1 - lam) * red
            if v > best:
                best, best_i = v, i
        selected.append(best_i)
    return selected


def main() -> None:
    n_queries = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    p = PipelineParams()
    corpus = load_dataset("hotpotqa_hipporag100").corpus
    rng = random.Random(7)
    t_post = t_naive = t_index = 0.0
    for _ in range(n_queries):
        docs = rng.sample(corpus, 200)
        cands = [
            SearchResult(
                id=f"{d.id}#c0",
                knowledge_id=d.id,
                content=d.text,
                knowledge_title=d.title,
                start_at=0,
                end_at=len(d.text),
                score=rng.random(),
            )
            for d in docs
        ]
        model = [RerankScore(i, rng.random()) for i in range(len(cands))]
        model.sort(key=lambda s: -s.relevance_score)

        t0 = time.perf_counter()
        kept, _ = filter_by_threshold(model, len(cands), p.rerank_threshold, p.rerank_fallback_min_score)
        reranked = score_reranked(cands, kept, p, False, p.faq_score_boost)
        reranked.sort(key=lambda r: -r.score)
        tokens = mmr_token_sets(reranked)
        order = select_mmr([r.score for r in reranked], k, p.mmr_lambda, tokens)
        t1 = time.perf_counter()
        chosen = [reranked[i] for i in order]
        merged = group_and_merge(remove_duplicate_results(chosen), p, [])
        merged = remove_partial_overlaps(remove_duplicate_results(merged), p.overlap_threshold)
        sort_search_results_deterministically(merged)[:k]
        t2 = time.perf_counter()
        t_post += t2 - t0

        scores = [r.score for r in reranked]
        t3 = time.perf_counter()
        fast = select_mmr(scores, k, p.mmr_lambda, tokens)
        t4 = time.perf_counter()
        slow = naive_mmr(scores, tokens, k, p.mmr_lambda)
        t5 = time.perf_counter()
        assert fast == slow, "indexed and naive MMR disagree"
        t_index += t4 - t3
        t_naive += t5 - t4
        del t1
    print(f"{n_queries} queries × 200 candidates, k={k}")
    print(
        f"post-retrieval (threshold + composite + tokens + MMR + merge + top-K): {1000 * t_post / n_queries:.1f} ms/query"
    )
    print(
        f"MMR inverted index: {1000 * t_index / n_queries:.2f} ms/query | naive: {1000 * t_naive / n_queries:.2f} ms/query "
        f"| naive/indexed = {t_naive / t_index:.1f}×"
    )


if __name__ == "__main__":
    main()
