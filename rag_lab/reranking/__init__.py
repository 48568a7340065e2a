"""Rerank building blocks: passage cleaning, passages, composite score, MMR selection."""

from __future__ import annotations

from rag_lab.reranking.clean import clean_passage
from rag_lab.reranking.composite import composite_score, format_score, source_weight
from rag_lab.reranking.mmr import (
    DEFAULT_MMR_LAMBDA,
    MMRCandidate,
    MMRStep,
    apply_mmr,
    mmr_token_sets,
    mmr_trace,
    select_mmr,
)
from rag_lab.reranking.passage import enriched_passage, generated_questions, model_passage

__all__ = [
    "clean_passage",
    "composite_score",
    "format_score",
    "source_weight",
    "DEFAULT_MMR_LAMBDA",
    "MMRCandidate",
    "MMRStep",
    "apply_mmr",
    "mmr_token_sets",
    "mmr_trace",
    "select_mmr",
    "enriched_passage",
    "generated_questions",
    "model_passage",
]
