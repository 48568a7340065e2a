"""Installing the stage cache on a lab (:func:`enable_stage_cache`) and taking it off again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rag_lab.eval.cache.keys import KbVersioner
from rag_lab.eval.cache.store import CacheStats, StageCache
from rag_lab.eval.cache.wrappers import CachingEmbedder, CachingReranker, CachingSearcher

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.lab.lab import Lab
    from rag_lab.models.base import Embedder, Reranker
    from rag_lab.pipeline.container import SearcherService

# --------------------------------------------------------------------------- enabling on a lab


@dataclass
class StageCacheHandle:
    """What :func:`enable_stage_cache` installed; ``disable()`` puts the original services back."""

    lab: Lab
    cache: StageCache
    versioner: KbVersioner
    original_searcher: SearcherService | None
    original_rerank_models: dict[str, Reranker]
    original_embedder_for: Callable[[KnowledgeBase], Embedder | None] | None
    embedders: dict[int, CachingEmbedder] = field(default_factory=dict)
    active: bool = True

    def stats(self) -> dict[str, CacheStats]:
        return self.cache.stats()

    def disable(self) -> None:
        if not self.active:
            return
        s = self.lab.services
        s.searcher = self.original_searcher
        s.rerank_models = dict(self.original_rerank_models)
        s.embedder_for = self.original_embedder_for
        self.versioner.close()
        self.cache.close()  # its file is whole on disk (a sweep on Ray packs the folder next)
        self.active = False
        if getattr(self.lab, "_stage_cache_handle", None) is self:
            self.lab._stage_cache_handle = None


def enable_stage_cache(
    lab: Lab,
    cache_dir: str | Path | StageCache,
    *,
    search: bool = True,
    rerank: bool = True,
    embeddings: bool = True,
) -> StageCacheHandle:
    """Wrap the lab's searcher, rerank models and query embedder with the stage cache.

    Calling it again on the same lab returns the active handle (with its cache).
    """
    current = getattr(lab, "_stage_cache_handle", None)
    if current is not None and current.active:
        return cast("StageCacheHandle", current)
    cache = cache_dir if isinstance(cache_dir, StageCache) else StageCache(cache_dir)
    s = lab.services
    versioner = KbVersioner(lab.workspace.store)
    handle = StageCacheHandle(
        lab=lab,
        cache=cache,
        versioner=versioner,
        original_searcher=s.searcher,
        original_rerank_models=dict(s.rerank_models),
        original_embedder_for=s.embedder_for,
    )
    if search and s.searcher is not None:
        s.searcher = CachingSearcher(s.searcher, cache, versioner)
    if rerank:
        s.rerank_models = {k: CachingReranker(v, cache) for k, v in s.rerank_models.items()}
    if embeddings and s.embedder_for is not None:
        original = s.embedder_for

        def embedder_for(kb: KnowledgeBase) -> Embedder | None:
            emb = original(kb)
            if emb is None:
                return None
            wrapped = handle.embedders.get(id(emb))
            if wrapped is None or wrapped.inner is not emb:
                wrapped = CachingEmbedder(emb, cache)
                handle.embedders[id(emb)] = wrapped
            return wrapped

        s.embedder_for = embedder_for
    setattr(lab, "_stage_cache_handle", handle)  # noqa: B010 - Lab does not declare it
    return handle
