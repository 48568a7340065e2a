"""Image recall inside a hybrid search (seed step 5, :mod:`rag_lab.retrieval.image_recall`): the
query embedded by the KBs' joint text/image embedder and searched in their image indexes, best
effort. :class:`ImageRecallStep` is one of the parts of
:class:`~rag_lab.retrieval.hybrid_search.HybridSearcher`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rag_lab.retrieval.base import IndexWithScore, SearchParams, SearchScope
from rag_lab.retrieval.hybrid_base import HybridSearcherBase
from rag_lab.retrieval.hybrid_trace import HybridTrace
from rag_lab.retrieval.image_recall import image_kb_ids, recall_images, search_image_indexes

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase

#: the records keep the logger name of :mod:`rag_lab.retrieval.hybrid_search`
log = logging.getLogger("rag_lab.retrieval.hybrid_search")


class ImageRecallStep(HybridSearcherBase):
    """The image hits a search appends to its vector hits."""

    async def _image_recall(
        self, image_kbs: Sequence[KnowledgeBase], query: str, pool: int, sp: SearchParams, trace: HybridTrace
    ) -> list[IndexWithScore]:
        """Seed step 5, best effort: any failure is logged and traced, and yields no image hits."""
        if not image_kbs:
            return []
        assert self.image_embedder_for is not None
        try:
            embedder = self.image_embedder_for(image_kbs[0])
            if embedder is None:
                trace.image_errors.append(f"no image embedder for knowledge base {image_kbs[0].name!r}")
                return []
            ids = image_kb_ids(image_kbs, embedder.model_key)
            skipped = [k.name for k in image_kbs if k.id not in ids]
            if skipped:
                trace.image_errors.append(
                    f"knowledge bases {skipped} use another image embedding model than {embedder.model_key!r}"
                )
            trace.image_kb_ids = ids
            if not ids:
                return []
            vecs = np.asarray(await asyncio.to_thread(embedder.embed, [query]), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != 1:
                raise ValueError(f"image embedder {embedder.model_key!r} returned shape {vecs.shape} for one query")
            qvec = vecs[0]
            errors: list[str] = []

            async def search(kb_ids: list[str], emb: np.ndarray, top_k: int, thr: float) -> list[IndexWithScore]:
                scope = SearchScope(kb_ids, top_k, thr, list(sp.knowledge_ids), list(sp.tag_ids))
                return await asyncio.to_thread(search_image_indexes, self.workspace, emb, scope, errors)

            outcome = await recall_images(search, ids, qvec, pool, sp.vector_threshold, self.params)
        except Exception as exc:
            log.warning("image recall failed, text results only: %s", exc)
            trace.image_errors.append(f"{type(exc).__name__}: {exc}")
            return []
        trace.image_errors.extend(dict.fromkeys(errors))
        if outcome.error:
            trace.image_errors.append(outcome.error)
        trace.image_requests, trace.image_hits, trace.image_dropped = (
            outcome.requests,
            outcome.hits,
            outcome.dropped_images,
        )
        return outcome.hits
