"""Image hits in the rerank stage (seed "Hits image (image_vector)").

An *image hit* is a result found through an image vector (chunk type ``image_vector``, or an image
chunk marked ``metadata["retrieved_by"] == "image_vector"``). A text reranker only sees its
caption / OCR text:

* OCR text of at least ``image_ocr_text_min_chars`` characters: it is reranked as text;
* otherwise it is *pictorial*: when the text reranker rejects it and its vector score is at least
  ``max(vector_threshold, image_keep_min_score)``, up to ``image_max_kept`` such hits are kept by
  vector score after the ranked text results (``metadata["kept_by"] = "image_vector"``), even when
  no text passes the threshold.

A vision reranker (``supports_images`` and ``rerank_images(query, image_urls)``) scores pictorial
hits on the image itself, on the same scale and threshold; if that fails, the text score stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rag_lab.models.base import RerankScore
from rag_lab.searchutil.imageinfo import parse_image_info
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

IMAGE_VECTOR = "image_vector"


def is_image_hit(r: SearchResult) -> bool:
    return r.chunk_type == IMAGE_VECTOR or r.metadata.get("retrieved_by") == IMAGE_VECTOR


def image_entries(r: SearchResult) -> list[dict[str, object]]:
    return parse_image_info(r.image_info) or []


def ocr_text(r: SearchResult) -> str:
    return "\n".join(str(e.get("ocr_text") or "").strip() for e in image_entries(r) if e.get("ocr_text")).strip()


def image_url(r: SearchResult) -> str:
    for e in image_entries(r):
        url = str(e.get("url") or e.get("original_url") or "")
        if url:
            return url
    return ""


def pictorial_indices(candidates: Sequence[SearchResult], params: PipelineParams) -> list[int]:
    """Image hits whose OCR text is too short to be reranked as text."""
    return [
        i for i, r in enumerate(candidates) if is_image_hit(r) and len(ocr_text(r)) < params.image_ocr_text_min_chars
    ]


async def score_images_with_vision(
    model: Any, query: str, candidates: Sequence[SearchResult], pictorial: list[int], scores: list[RerankScore]
) -> tuple[list[RerankScore], int]:
    """Replace the text scores of pictorial hits by image scores when the model can see images.
    Returns (scores, number of images scored); any failure keeps the text scores."""
    if not pictorial or not getattr(model, "supports_images", False):
        return scores, 0
    with_url = [(i, image_url(candidates[i])) for i in pictorial]
    with_url = [(i, u) for i, u in with_url if u]
    if not with_url:
        return scores, 0
    try:
        image_scores = await model.rerank_images(query, [u for _, u in with_url])
    except Exception:
        return scores, 0
    by_candidate = {with_url[s.index][0]: s.relevance_score for s in image_scores if 0 <= s.index < len(with_url)}
    out = [RerankScore(s.index, by_candidate.get(s.index, s.relevance_score)) for s in scores]
    known = {s.index for s in out}
    out += [RerankScore(i, v) for i, v in by_candidate.items() if i not in known]
    out.sort(key=lambda s: (-s.relevance_score, s.index))
    return out, len(by_candidate)


def keep_rejected_images(
    candidates: Sequence[SearchResult],
    pictorial: list[int],
    passed: set[int],
    vector_threshold: float,
    params: PipelineParams,
) -> list[int]:
    """Pictorial hits the reranker rejected but whose vector score is high enough, best first."""
    floor = max(vector_threshold, params.image_keep_min_score)
    rejected = [i for i in pictorial if i not in passed and candidates[i].score >= floor]
    rejected.sort(key=lambda i: (-candidates[i].score, i))
    return rejected[: params.image_max_kept]
