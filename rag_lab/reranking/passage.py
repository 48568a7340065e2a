"""Passages built from a search result (spec §4.6.3 and Appendix A.1).

* ``enriched_passage``: the cleaned body plus image captions/OCR and generated questions. It is
  the MMR token source and the base of the rerank input.
* ``model_passage``: what the rerank model scores: title, heading breadcrumb, enriched body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from rag_lab.reranking.clean import clean_passage
from rag_lab.searchutil.imageinfo import image_field, parse_image_info
from rag_lab.searchutil.text import go_trim

if TYPE_CHECKING:
    from rag_lab.types.search_result import SearchResult

__all__ = [
    "CONTEXT_HEADER_KEY",
    "clear_passage_caches",
    "generated_questions",
    "enriched_passage",
    "model_passage",
    "passages_of",
    "passages_of_results",
]

log = logging.getLogger(__name__)

#: ``metadata`` key of the chunk's heading breadcrumb (e.g. ``"Refunds > Conditions"``).
CONTEXT_HEADER_KEY = "context_header"


def generated_questions(chunk_metadata: object) -> list[str] | None:
    """The question strings of ``{"generated_questions": [{"question": ...}, ...]}``.

    ``chunk_metadata`` may be a dict or its JSON text (str/bytes). Returns ``None`` when it
    does not parse as document chunk metadata, ``[]`` when it has no questions or marks them
    inactive (``"generated_questions_inactive": true``, A.1). Every question is kept, in order.
    """
    meta = chunk_metadata
    if isinstance(meta, (str, bytes, bytearray)):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    if meta is None:
        return []
    if not isinstance(meta, dict):
        return None
    items = meta.get("generated_questions")
    if items is None:
        return []
    if not isinstance(items, list):
        return None
    out: list[str] = []
    for item in items:
        if item is None:
            out.append("")
            continue
        if not isinstance(item, dict):
            return None
        q = item.get("question")
        if q is not None and not isinstance(q, str):
            return None
        out.append(q or "")
    if meta.get("generated_questions_inactive") is True:
        return []
    return out


def _has_chunk_metadata(value: object) -> bool:
    if value is None:
        return False
    if isinstance(value, (str, bytes, bytearray, dict, list)):
        return len(value) > 0
    return True


#: ``clean_passage`` is pure and the same chunks come back question after question
_clean = lru_cache(maxsize=65536)(clean_passage)


def clear_passage_caches() -> None:
    """Empty the memoised cleaned and plain passages (benchmarks time first sight with this)."""
    _clean.cache_clear()
    _plain_passages.cache_clear()


def enriched_passage(result: SearchResult | _PlainResult) -> str:
    """``clean_passage(content)`` plus enrichments (§4.6.3, A.1).

    Enrichments, in order: each image's caption then OCR text (non-empty, and not equal to the
    trimmed chunk content, so an image chunk is not doubled), then the generated questions
    joined with ``"; "``. They follow the text after ``"\\n\\n"`` (when the text is non-empty),
    one per line. Invalid image info or chunk metadata is logged and ignored.
    """
    content = result.content or ""
    text = _clean(content)
    info = getattr(result, "image_info", "") or ""
    chunk_meta = getattr(result, "chunk_metadata", None)
    if not info and not chunk_meta:
        return text
    body = go_trim(content)
    enrichments: list[str] = []

    if info:
        entries = parse_image_info(info)
        if entries is None:
            log.warning("enriched_passage: invalid image_info of chunk %s ignored", getattr(result, "id", "?"))
        else:
            for entry in entries:
                for key in ("caption", "ocr_text"):
                    value = image_field(entry, key)
                    if value and go_trim(value) != body:
                        enrichments.append(value)

    if _has_chunk_metadata(chunk_meta):
        questions = generated_questions(chunk_meta)
        if questions is None:
            log.warning("enriched_passage: invalid chunk_metadata of chunk %s ignored", getattr(result, "id", "?"))
        elif questions:
            enrichments.append("; ".join(questions))

    if not enrichments:
        return text
    if text:
        text += "\n\n"
    return text + "\n".join(enrichments)


def model_passage(result: SearchResult) -> str:
    """The rerank model's input (A.1 + seed): title, heading breadcrumb and enriched body.

    FAQ chunks and blank enriched passages are returned as is. Otherwise each of the trimmed
    ``knowledge_title``, the trimmed ``metadata["context_header"]`` and the enriched passage
    is included when non-blank, joined with ``"\\n\\n"``.
    """
    return passages_of(result)[1]


def passages_of(result: SearchResult) -> tuple[str, str]:
    """``(enriched_passage(result), model_passage(result))``, the enriched passage built once.

    Results without image info or chunk metadata (most text chunks) are memoised on the four
    fields the passages depend on: the same chunks come back question after question."""
    if not getattr(result, "image_info", "") and getattr(result, "chunk_metadata", None) is None:
        metadata = getattr(result, "metadata", None) or {}
        return _plain_passages(
            result.content or "",
            result.knowledge_title or "",
            str(metadata.get(CONTEXT_HEADER_KEY) or ""),
            (result.chunk_type or "") == "faq",
        )
    return _build_passages(result)


def passages_of_results(results: Sequence[SearchResult]) -> list[tuple[str, str]]:
    """:func:`passages_of` of each result (one loop; the memoised common case inlined)."""
    plain = _plain_passages
    out: list[tuple[str, str]] = []
    for r in results:
        if r.image_info or r.chunk_metadata is not None:
            out.append(_build_passages(r))
            continue
        metadata = r.metadata
        header = metadata.get(CONTEXT_HEADER_KEY) if metadata else None
        out.append(plain(r.content or "", r.knowledge_title or "", str(header or ""), (r.chunk_type or "") == "faq"))
    return out


@lru_cache(maxsize=65536)
def _plain_passages(content: str, title: str, header: str, faq: bool) -> tuple[str, str]:
    return _build_passages(_PlainResult(content, title, {CONTEXT_HEADER_KEY: header} if header else {}, faq))


class _PlainResult:
    """The fields :func:`_build_passages` reads, for a result without image info or chunk metadata."""

    __slots__ = ("content", "knowledge_title", "metadata", "chunk_type")
    image_info = ""
    chunk_metadata = None
    id = "?"

    def __init__(self, content: str, title: str, metadata: dict[str, str], faq: bool) -> None:
        self.content, self.knowledge_title, self.metadata = content, title, metadata
        self.chunk_type = "faq" if faq else "text"


def _build_passages(result: SearchResult | _PlainResult) -> tuple[str, str]:
    passage = enriched_passage(result)
    if not go_trim(passage) or (result.chunk_type or "") == "faq":
        return passage, passage
    parts: list[str] = []
    title = go_trim(result.knowledge_title or "")
    if title:
        parts.append(title)
    metadata = getattr(result, "metadata", None) or {}
    header = go_trim(str(metadata.get(CONTEXT_HEADER_KEY) or ""))
    if header:
        parts.append(header)
    if not parts:
        return passage, passage
    parts.append(passage)
    return passage, "\n\n".join(parts)
