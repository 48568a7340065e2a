"""Rerank building blocks: passage cleaning, passages, composite score, MMR selection."""

from __future__ import annotations

from rag_lab.reranking import mmr
from rag_lab.reranking.clean import clean_passage
from rag_lab.reranking.composite import composite_score, format_score, source_weight
from rag_lab.reranking.mmr import *  # noqa: F403  (the names of mmr.__all__)
from rag_lab.reranking.passage import enriched_passage, generated_questions, model_passage

__all__ = [
    "clean_passage",
    "composite_score",
    "format_score",
    "source_weight",
    *mmr.__all__,
    "enriched_passage",
    "generated_questions",
    "model_passage",
]
