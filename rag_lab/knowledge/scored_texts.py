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

from typing import TYPE_CHECKING, Any

from rag_lab.modelcontext.render import chat_passage
from rag_lab.models.sentences import split_sentences
from rag_lab.reranking.passage import passages_of
from rag_lab.retrieval.hybrid_search import chunk_to_search_result

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace

__all__ = ["scored_texts", "warm_kb"]


def scored_texts(chunk: Chunk, document: Knowledge) -> list[str]:
    """The model passage of ``chunk`` (of ``document``, a stored ``Knowledge``) and, for text
    chunks, the sentences the answerer splits from its chat passage; blank texts left out."""
    result = chunk_to_search_result(chunk, document, 0.0, 0)
    _, model = passages_of(result)
    out = [model] if model.strip() else []
    if chunk.chunk_type != "faq":  # an FAQ's context is its answers, rendered from the metadata
        out.extend(split_sentences(chat_passage(result)))
    return out


def warm_kb(ws: Workspace, kb: KnowledgeBase, embedder: Any, batch: int = 512) -> tuple[int, int]:
    """Fill the vector cache behind ``embedder`` (a Lab's, a ``CachedEmbedder`` with a store) for
    a KB ingested earlier, e.g. before the cache existed (re-ingesting finds every document
    unchanged and embeds nothing). First the vectors the KB's index already holds, copied where
    that is exact: the index keeps the float32 vectors the embedder returned at ingest, and the
    KB's model key must be the embedder's; then the texts the re-scorer and the answerer will
    embed (:func:`scored_texts`). Returns (vectors copied from the index, texts computed)."""
    from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

    store, warm = getattr(embedder, "store", None), getattr(embedder, "warm", None)
    if store is None or warm is None or kb.embedding_model_key != embedder.model_key:
        return 0, 0
    copied = 0
    vindex = ws.vector_index(kb)
    if vindex is not None:
        entries, vectors = vindex.export_vectors()
        own = ws.store.get_chunks({e.chunk_id for e in entries if e.text is None})
        pairs = [
            (e.text if e.text is not None else own[e.chunk_id].content, i)
            for i, e in enumerate(entries)
            if e.text is not None or e.chunk_id in own
        ]
        for start in range(0, len(pairs), batch):
            part = pairs[start : start + batch]
            copied += store.put_many(embedder.store_key, [t for t, _ in part], vectors[[i for _, i in part]])
    docs = {d.id: d for d in ws.store.list_knowledge(kb.id)}
    texts: list[str] = []
    for c in ws.store.list_chunks(kb.id):
        if c.chunk_type in SEARCHABLE_CHUNK_TYPES and c.knowledge_id in docs:
            texts.extend(scored_texts(c, docs[c.knowledge_id]))
    return copied, int(warm(texts))
