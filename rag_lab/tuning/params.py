"""Which parameters the fast evaluator replays from captured inputs, and which invalidate them.

* :data:`POST_RETRIEVAL_PARAMS`: read only by the stages after retrieval (rerank ladder and
  composite, FAQ / wiki boosts, kept images, MMR, merge, top-K). A config that changes only these
  (and :data:`ANSWER_PARAMS`) is evaluated from the captured inputs.
* :data:`ANSWER_PARAMS`: read only when the answer is written; they never change the contexts.
* Everything else (search settings, thresholds the search applies, BM25 settings, models, the
  stages switched on or off) invalidates the captured inputs: such a config is captured again
  (one pipeline run per question for each distinct retrieval config) and then evaluated.

``rerank_top_k`` is post-retrieval except for questions whose search ran query expansion (its
top-k reads ``rerank_top_k``): those are recaptured when it changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANSWER_PARAMS",
    "CAPTURE_PARAMS",
    "MERGE_PARAMS",
    "POST_RETRIEVAL_PARAMS",
    "UNSUPPORTED_SWITCHES",
    "retrieval_part",
    "split_config",
]

#: read by the rerank stage (with its wiki / memory layers) after the model call, and FILTER_TOP_K
RERANK_PARAMS = frozenset(
    {
        "rerank_threshold",
        "rerank_fallback_min_score",
        "rerank_degrade_factor",
        "rerank_degrade_floor",
        "composite_model_weight",
        "composite_base_weight",
        "composite_source_weight",
        "web_source_weight",
        "mmr_lambda",
        "rerank_top_k",
        "faq_priority_enabled",
        "faq_score_boost",
        "image_keep_min_score",
        "image_max_kept",
        "wiki_boost_factor",
    }
)
#: read by CHUNK_MERGE
MERGE_PARAMS = frozenset(
    {
        "history_overlap_threshold",
        "history_score_factor",
        "history_max_refs",
        "expansion_min_len",
        "expansion_max_len",
        "overlap_threshold",
        "join_min_overlap",
        "join_span",
        "append_head_slack",
    }
)
POST_RETRIEVAL_PARAMS = RERANK_PARAMS | MERGE_PARAMS
#: read when the answer is written (prompt, model call, stream, fallback): never the contexts
ANSWER_PARAMS = frozenset(
    {
        "temperature",
        "max_completion_tokens",
        "citation_enabled",
        "fallback_strategy",
        "fallback_response",
        "faq_direct_answer_threshold",
        "chat_stream_idle_timeout_s",
        "context_images_max",
        "context_image_max_bytes",
    }
)
#: read while capturing (candidate selection and the model call)
CAPTURE_PARAMS = frozenset({"rerank_max_candidates", "image_ocr_text_min_chars", "rerank_timeout_s"})
#: stages the evaluator does not replay: with one of these on, the full pipeline is used
UNSUPPORTED_SWITCHES = ("web_search_enabled", "data_analysis_enabled")


def split_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(post-retrieval or answer overrides, overrides that invalidate the captured inputs)``."""
    post = {k: v for k, v in config.items() if k in POST_RETRIEVAL_PARAMS or k in ANSWER_PARAMS}
    other = {k: v for k, v in config.items() if k not in post}
    return post, other


def retrieval_part(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The capture key of a full params mapping: every field that is neither post-retrieval nor
    answer-only, sorted (``rerank_top_k`` is added by the caller for expanded questions)."""
    return tuple(sorted((k, v) for k, v in params.items() if k not in POST_RETRIEVAL_PARAMS and k not in ANSWER_PARAMS))
