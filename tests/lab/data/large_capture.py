"""A synthetic capture with many candidates (what over-recall gives on a real KB: 150-500), for
the plot-readability tests. Deterministic: ``random.Random(seed)``; long, realistic chunk ids."""

from __future__ import annotations

import random

from rag_lab.lab.capture import Capture
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult


def large_capture(n: int = 180, k: int = 10, seed: int = 7) -> Capture:
    rnd = random.Random(seed)
    ids = [
        f"kb_hotpot:{rnd.choice(['Lighthouse', 'Volcano', 'Harbour'])}_of_district_{i:03d}.md#c{i % 7}"
        for i in range(n)
    ]
    vec = sorted(range(n), key=lambda _: rnd.random())
    kw = sorted(range(n), key=lambda _: rnd.random())[: int(n * 0.8)]
    wv, wk, rrf_k = 0.7, 0.3, 60.0
    fused_raw: dict[int, float] = {}
    for rank, i in enumerate(vec, 1):
        fused_raw[i] = fused_raw.get(i, 0.0) + wv / (rrf_k + rank)
    for rank, i in enumerate(kw, 1):
        fused_raw[i] = fused_raw.get(i, 0.0) + wk / (rrf_k + rank)
    top = wv / (rrf_k + 1) + wk / (rrf_k + 1)
    fused = sorted(fused_raw, key=lambda i: (-fused_raw[i], i))
    fusion = {
        "query": "q",
        "kb_ids": ["kb_hotpot"],
        "fusion": "rrf",
        "rrf_k": rrf_k,
        "vector_weight": wv,
        "keyword_weight": wk,
        "match_count": 50,
        "pool_size": n,
        "vector": [{"chunk_id": ids[i], "knowledge_id": ids[i], "score": 0.9 - 0.004 * r} for r, i in enumerate(vec)],
        "keyword": [{"chunk_id": ids[i], "knowledge_id": ids[i], "score": 12.0 - 0.05 * r} for r, i in enumerate(kw)],
        "fused": [{"chunk_id": ids[i], "score": min(1.0, fused_raw[i] / top)} for i in fused],
    }
    model = [rnd.random() for _ in range(n)]
    rows = []
    for i in range(n):
        base = min(1.0, fused_raw[i] / top)
        comp = 0.6 * model[i] + 0.3 * base + 0.1
        rows.append(
            {
                "id": ids[i],
                "chunk_type": "text",
                "knowledge_source": "",
                "base_score": base,
                "model_score": model[i],
                "composite_score": comp,
                "final_score": comp,
                "faq_boosted": False,
                "passed_threshold": model[i] >= 0.1,
                "kept_by": "",
                "selected": False,
            }
        )
    passed = [i for i in range(n) if rows[i]["passed_threshold"]]
    ranked = sorted(passed, key=lambda i: -rows[i]["final_score"])
    vocab = [f"w{j}" for j in range(60)]
    tokens = [sorted(set(rnd.sample(vocab, 12))) for _ in ranked]
    chat = ChatManage()
    chat.state.diagnostics["rerank"] = {
        "threshold": 0.1,
        "fallback_min": 0.15,
        "outcome": "ok",
        "mmr_k": k,
        "mmr_lambda": 0.7,
        "weights": {"model": 0.6, "base": 0.3, "source": 0.1, "web_source_weight": 0.95},
        "rows": rows,
        "mmr": [],
    }
    chat.state.search_result = [SearchResult(id=ids[i], score=fused_raw[i] / top) for i in fused[:50]]
    extras = {
        "fusion": [fusion],
        "mmr_inputs": {
            "ids": [ids[i] for i in ranked],
            "scores": [rows[i]["final_score"] for i in ranked],
            "tokens": tokens,
            "k": k,
            "lambda": 0.7,
            "trace": [],
        },
    }
    snaps = {"chunk_search_parallel": chat, "chunk_rerank": chat}
    return Capture(question="q", snapshots=snaps, params=PipelineParams(), extras=extras)
