"""The texts a question will embed besides the chunks' own vectors, known at ingest.

The re-scorer (:class:`~rag_lab.models.rerank.EmbeddingReranker`) embeds each candidate's *model
passage* (title, heading breadcrumb and enriched body, :func:`~rag_lab.reranking.passage.model_passage`),
not the chunk text the vector index holds; the extractive answerer
(:class:`~rag_lab.models.extractive.ExtractiveChatModel`) embeds the *sentences* of the passages it
is given (:func:`~rag_lab.models.extractive.split_sentences` of the chat passage). Both depend
only on the stored chunk and its document, so ingest embeds them into the workspace's vector cache
(``CachedEmbedder.warm``) and a first question finds them there.

Exact for the model passages: they are built here by the very functions the rerank stage calls, on
the :class:`~rag_lab.types.search_result.SearchResult` hydration makes. For the answerer it is
exact where the context holds the chunk as stored; where the merge stage joins neighbouring chunks
of a document into one context, the sentences that straddle the seam are new texts (embedded on
first use, then cached), the others are the same (``benchmarks/cold_eval.py`` counts both).
"""

from __future__ import annotations

from typing import Any

from rag_lab.modelcontext.render import chat_passage
from rag_lab.models.extractive import split_sentences
from rag_lab.reranking.passage import passages_of
from rag_lab.retrieval.hybrid_search import chunk_to_search_result

__all__ = ["scored_texts"]


def scored_texts(chunk: Any, document: Any) -> list[str]:
    """The model passage of ``chunk`` (of ``document``, a stored ``Knowledge``) and, for text
    chunks, the sentences the answerer splits from its chat passage; blank texts left out."""
    result = chunk_to_search_result(chunk, document, 0.0, 0)
    _, model = passages_of(result)
    out = [model] if model.strip() else []
    if chunk.chunk_type != "faq":  # an FAQ's context is its answers, rendered from the metadata
        out.extend(split_sentences(chat_passage(result)))
    return out
