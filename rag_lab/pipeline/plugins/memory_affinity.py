"""MemoryAffinity (innermost layer of chunk_rerank): documents the caller cited at least twice in
past answers get a logarithmic boost of at most ×1.15 (spec §4.6.5)."""

from __future__ import annotations

import math

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.reranking.composite import boosted_order
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.params import PipelineParams


def affinity_factor(hits: int, params: PipelineParams) -> float:
    """1 below the minimum; else 1 + max_boost * min(1, ln(1+h) / ln(1+saturation))."""
    if hits < params.memory_affinity_min_hits:
        return 1.0
    ratio = math.log1p(hits) / math.log1p(params.memory_affinity_saturation_hits)
    return 1.0 + params.memory_affinity_max_boost * min(1.0, ratio)


class PluginMemoryAffinity(StagePlugin):
    events = (EventType.CHUNK_RERANK,)
    contract = StageContract(
        reads=("request.user_id", "state.rerank_result"),
        writes=("state.rerank_result",),
        params=(
            "memory_affinity_max_boost",
            "memory_affinity_max_ids",
            "memory_affinity_min_hits",
            "memory_affinity_saturation_hits",
        ),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        err = await next()
        memory = self.services.memory
        results = chat.state.rerank_result
        if memory is None or not results:
            return err
        p = chat.request.params
        ids: list[str] = []
        for r in results:
            if r.knowledge_id and r.knowledge_id not in ids:
                ids.append(r.knowledge_id)
                if len(ids) >= p.memory_affinity_max_ids:
                    break
        try:
            hits = memory.document_affinity(chat.request.user_id, ids)
        except Exception:
            return err  # a memory failure never blocks the answer
        factors = [affinity_factor(int(hits.get(r.knowledge_id, 0)), p) for r in results]
        if not any(f > 1.0 for f in factors):
            return err
        scores, order = boosted_order([r.score for r in results], factors)
        for r, score, factor in zip(results, scores, factors):
            r.score = score
            if factor > 1.0:
                r.metadata["memory_affinity"] = f"{factor:.4f}"
        results[:] = [results[i] for i in order]
        return err
