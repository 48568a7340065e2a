"""Search utilities: tokenisation, similarity, signatures, chunk joining, image info, dedup."""

from __future__ import annotations

from rag_lab.searchutil.chunkmerge import (
    append_with_exact_overlap,
    append_with_overlap,
    contains_chunk_content,
    join_chunk_content,
    merge_text_chunks,
)
from rag_lab.searchutil.dedup import remove_duplicate_results, remove_partial_overlaps
from rag_lab.searchutil.imageinfo import (
    enrich_content_with_image_info_for_chat,
    filter_image_info_by_content_urls,
    image_urls_in_content,
    merge_image_info,
    parse_image_info,
    prune_markdown_images_by_image_info,
    slice_content_by_document_range,
)
from rag_lab.searchutil.text import (
    build_content_signature,
    content_overlap_ratio,
    go_fields,
    go_lower,
    go_trim,
    html_escape5,
    is_content_contained,
    jaccard,
    normalize_content,
    normalize_keyword_scores,
    tokenize_simple,
    utf8_len,
)

__all__ = [
    "append_with_exact_overlap",
    "append_with_overlap",
    "contains_chunk_content",
    "join_chunk_content",
    "merge_text_chunks",
    "remove_duplicate_results",
    "remove_partial_overlaps",
    "enrich_content_with_image_info_for_chat",
    "filter_image_info_by_content_urls",
    "image_urls_in_content",
    "merge_image_info",
    "parse_image_info",
    "prune_markdown_images_by_image_info",
    "slice_content_by_document_range",
    "build_content_signature",
    "content_overlap_ratio",
    "go_fields",
    "go_lower",
    "go_trim",
    "html_escape5",
    "is_content_contained",
    "jaccard",
    "normalize_content",
    "normalize_keyword_scores",
    "tokenize_simple",
    "utf8_len",
]
