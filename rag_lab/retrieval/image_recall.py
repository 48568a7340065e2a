"""Image recall inside HybridSearch (seed §5, step 5 "Rappel images").

A KB *has image vectors* when ``metadata["image_vector_enabled"]`` is true and it names the image
embedding model (``metadata["image_embedding_model_key"]``); its images are embedded by an
:class:`ImageEmbedder` whose text tower embeds the query in the same space, and stored in a
per-KB image vector index (``<root>/indexes/<kb_id>/images/``, see :mod:`rag_lab.knowledge.images`).

One search with image KBs in scope adds an image request:

* top-k ``min(ceil(pool × image_recall_top_k_factor), retrieval_pool_max)`` (1.5, 500);
* threshold ``min(vector_threshold, image_vector_threshold)`` (0.1);
* :func:`filter_image_hits` — text rows keep ``vector_threshold``, image rows the image threshold;
  image rows found by keywords only, from a KB without image vectors, or whose chunk is no longer
  searchable are *dropped images*;
* :func:`recall_images` — when the request came back full and images were dropped, the request is
  repeated with top-k doubled (capped), ``image_recall_max_requests`` requests at most (pool 50:
  75, 150, 300, 500);
* best effort: a KB whose image index fails is skipped, and a failed image recall leaves the text
  results alone (the error is recorded in the trace).

Image rows carry ``source_type = "image"``; the hybrid search marks their results
``metadata["retrieved_by"] = "image_vector"``, which the rerank stage recognises
(:mod:`rag_lab.reranking.image`).
"""

from __future__ import annotations

import logging
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from rag_lab.retrieval.base import IndexWithScore, SearchScope
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.vector_index import VectorIndex

log = logging.getLogger(__name__)

IMAGE_VECTOR = "image_vector"
#: ``IndexWithScore.source_type`` of a row found through an image vector
IMAGE_SOURCE = "image"
IMAGE_INDEX_DIR = "images"

__all__ = [
    "ImageEmbedder",
    "IMAGE_VECTOR",
    "IMAGE_SOURCE",
    "has_image_vectors",
    "image_kb_ids",
    "image_top_k",
    "image_threshold",
    "filter_image_hits",
    "ImageFilterResult",
    "ImageRecallOutcome",
    "recall_images",
    "image_index_dir",
    "image_index",
    "search_image_indexes",
]


@runtime_checkable
class ImageEmbedder(Protocol):
    """A joint text/image embedding model (CLIP-like). Both towers return L2-normalised rows in
    the same space; ``model_key`` names that space."""

    model_key: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_images(self, paths: Sequence[str]) -> np.ndarray: ...


# -- pure helpers ----------------------------------------------------------------------------
def has_image_vectors(kb: KnowledgeBase) -> bool:
    """The KB has image vectors enabled and names its image embedding model."""
    meta = kb.metadata or {}
    return bool(meta.get("image_vector_enabled")) and bool(meta.get("image_embedding_model_key"))


def image_kb_ids(kbs: Sequence[KnowledgeBase], model_key: str) -> list[str]:
    """Ids of the KBs with image vectors in ``model_key``'s space (others cannot be searched with
    that query vector)."""
    return [k.id for k in kbs if has_image_vectors(k) and k.metadata.get("image_embedding_model_key") == model_key]


def image_top_k(pool: int, params: PipelineParams) -> int:
    """``min(ceil(pool × factor), retrieval_pool_max)``; at least 1."""
    return max(1, min(math.ceil(pool * params.image_recall_top_k_factor), params.retrieval_pool_max))


def image_threshold(vector_threshold: float, params: PipelineParams) -> float:
    """``min(vector_threshold, image_vector_threshold)``."""
    return min(vector_threshold, params.image_vector_threshold)


@dataclass(slots=True)
class ImageFilterResult:
    kept: list[IndexWithScore]
    #: image rows rejected for what they are (keyword-only, KB without image vectors, chunk gone)
    dropped_images: int = 0
    #: rows rejected by their threshold
    below_threshold: int = 0


def filter_image_hits(
    hits: Sequence[IndexWithScore], image_kbs: Sequence[str], vector_threshold: float, image_thr: float
) -> ImageFilterResult:
    """Keep text rows with ``score >= vector_threshold`` and image rows (``source_type ==
    "image"``) with ``score >= image_thr`` that came from a vector match in a KB of ``image_kbs``
    and whose chunk is still searchable (``is_enabled``). Order is preserved."""
    allowed = set(image_kbs)
    out = ImageFilterResult(kept=[])
    for h in hits:
        if h.source_type == IMAGE_SOURCE:
            if h.match_type == int(MatchType.KEYWORDS) or h.knowledge_base_id not in allowed or not h.is_enabled:
                out.dropped_images += 1
                continue
            if h.score < image_thr:
                out.below_threshold += 1
                continue
        else:
            if not h.is_enabled:
                continue
            if h.score < vector_threshold:
                out.below_threshold += 1
                continue
        out.kept.append(h)
    return out


# -- the request loop ------------------------------------------------------------------------
ImageSearch = Callable[[list[str], np.ndarray, int, float], Awaitable[list[IndexWithScore]]]


@dataclass(slots=True)
class ImageRecallOutcome:
    hits: list[IndexWithScore] = field(default_factory=list)
    #: top-k of each request made, in order
    requests: list[int] = field(default_factory=list)
    dropped_images: int = 0
    error: str = ""


async def recall_images(
    search: ImageSearch,
    kb_ids: Sequence[str],
    embedding: np.ndarray,
    pool: int,
    vector_threshold: float,
    params: PipelineParams,
) -> ImageRecallOutcome:
    """Run the image request and refill past dropped images (see the module docstring). A failing
    request ends the loop: the hits of the last successful request stand (best effort)."""
    out = ImageRecallOutcome()
    ids = list(kb_ids)
    if not ids:
        return out
    thr = image_threshold(vector_threshold, params)
    wanted = top_k = image_top_k(pool, params)
    cap = max(top_k, params.retrieval_pool_max)
    while True:
        out.requests.append(top_k)
        try:
            raw = await search(ids, embedding, top_k, thr)
        except Exception as exc:  # best effort: keep what an earlier request found
            out.error = f"{type(exc).__name__}: {exc}"
            log.warning("image recall request (top_k %d) failed: %s", top_k, exc)
            return out
        f = filter_image_hits(raw, ids, vector_threshold, thr)
        out.hits, out.dropped_images = f.kept, f.dropped_images
        full = len(raw) >= top_k
        if not (full and f.dropped_images and len(f.kept) < wanted):
            return out
        if top_k >= cap or len(out.requests) >= params.image_recall_max_requests:
            return out
        top_k = min(2 * top_k, cap)


# -- the local image indexes -----------------------------------------------------------------
def image_index_dir(ws: Workspace, kb_id: str) -> Path:
    return ws.index_dir(kb_id) / IMAGE_INDEX_DIR


_CACHE: weakref.WeakKeyDictionary[object, dict[str, tuple[int, VectorIndex]]] = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def _stamp(path: Path) -> int:
    from rag_lab.retrieval.vector_index import VectorIndex
    from rag_lab.retrieval.versioned import current_dir

    f = current_dir(path)[0] / VectorIndex.IDS_FILE
    return f.stat().st_mtime_ns if f.exists() else -1


def image_index(ws: Workspace, kb: KnowledgeBase) -> VectorIndex:
    """The KB's image vector index (cached per workspace, reloaded when its files change).
    Raises :class:`~rag_lab.retrieval.vector_index.VectorIndexError` for an unreadable index."""
    from rag_lab.retrieval.vector_index import VectorIndex, VectorIndexError

    dim = int(kb.metadata.get("image_embedding_dim") or 0)
    if dim <= 0:
        raise VectorIndexError(f"knowledge base {kb.name!r}: metadata image_embedding_dim={dim!r} must be positive")
    path = image_index_dir(ws, kb.id)
    stamp = _stamp(path)
    with _CACHE_LOCK:
        per_ws = _CACHE.setdefault(ws, {})
        cached = per_ws.get(kb.id)
        if cached is not None and cached[0] == stamp and cached[1].dimension == dim:
            return cached[1]
        idx = VectorIndex.load(path, dim)
        per_ws[kb.id] = (stamp, idx)
        return idx


def remember_image_index(ws: Workspace, kb_id: str, idx: VectorIndex) -> None:
    """Cache ``idx`` after it was saved (so the next search does not reload it)."""
    with _CACHE_LOCK:
        _CACHE.setdefault(ws, {})[kb_id] = (_stamp(image_index_dir(ws, kb_id)), idx)


def search_image_indexes(
    ws: Workspace, embedding: np.ndarray, scope: SearchScope, errors: list[str] | None = None
) -> list[IndexWithScore]:
    """Raw image rows of the scope's KBs, best ``top_k`` by score (ties by entry id). Rows whose
    chunk is gone or disabled come back with ``is_enabled=False`` (the filter drops them); a
    document / tag scope restricts the search itself. A KB whose index cannot be read is skipped
    and named in ``errors`` (best effort)."""
    from rag_lab.retrieval.engine import is_searchable

    store = ws.store
    kb_ids, knowledge_ids, tag_ids = scope.kb_ids, scope.knowledge_ids, scope.tag_ids
    kbs = store.get_kbs(list(dict.fromkeys(kb_ids)))
    raw: list[tuple[str, str, str, float]] = []
    for kid in dict.fromkeys(kb_ids):
        kb = kbs.get(kid)
        if kb is None:
            continue
        try:
            idx = image_index(ws, kb)
            allowed = store.searchable_chunk_ids(kb.id, knowledge_ids, tag_ids) if (knowledge_ids or tag_ids) else None
            if allowed is not None and not allowed:
                continue
            found = idx.search_entries(embedding, scope.top_k, scope.threshold, allowed)
        except Exception as exc:
            msg = f"image index of knowledge base {kb.name!r} ({kb.id}): {exc}"
            log.warning("image recall skipped %s", msg)
            if errors is not None:
                errors.append(msg)
            continue
        raw.extend((e.entry_id, e.chunk_id, kb.id, s) for e, s in found)
    if errors and len(errors) >= len(kbs) and not raw:
        raise RuntimeError("; ".join(errors))
    raw.sort(key=lambda r: (-r[3], r[0]))
    raw = raw[: scope.top_k]
    chunks = store.get_chunks(r[1] for r in raw)
    out = []
    for entry_id, chunk_id, kb_id, score in raw:
        c = chunks.get(chunk_id)
        out.append(
            IndexWithScore(
                id=entry_id,
                content=c.content if c else "",
                chunk_id=chunk_id,
                knowledge_id=c.knowledge_id if c else "",
                knowledge_base_id=kb_id,
                score=float(score),
                match_type=int(MatchType.EMBEDDING),
                source_id=entry_id,
                source_type=IMAGE_SOURCE,
                tag_id=c.tag_id if c else "",
                is_enabled=c is not None and is_searchable(c),
            )
        )
    return out
