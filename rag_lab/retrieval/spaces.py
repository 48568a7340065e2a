"""Embedding spaces and vector entries: what ingestion writes and every retrieval engine indexes.

Here, below ``knowledge`` in the import layers, so that the local and Milvus engines and the
ingestion code share one definition (``tests/test_import_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rag_lab.types.errors import MixedEmbeddingSpaces

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, KnowledgeBase
    from rag_lab.models.base import Embedder

__all__ = ["check_embedder", "vector_entries"]


def vector_entries(chunk: Chunk) -> list[tuple[str, str | None, str]]:
    """``(entry_id, own_text, text_to_embed)`` per vector of a chunk."""
    if chunk.chunk_type == "faq":
        meta = chunk.metadata or {}
        questions = [meta.get("standard_question", "")] + list(meta.get("similar_questions") or [])
        out = []
        for i, q in enumerate(questions):
            q = (q or "").strip()
            if q:
                out.append((f"{chunk.id}#q{i}", q, q))
        return out
    return [(chunk.id, None, chunk.content)]


def check_embedder(kb: KnowledgeBase, embedder: Embedder | None) -> None:
    """Raise :class:`MixedEmbeddingSpaces` unless ``embedder`` produces ``kb``'s embedding space."""
    if not kb.embedding_model_key:
        if embedder is not None:
            raise MixedEmbeddingSpaces(
                f"knowledge base {kb.name!r} ({kb.id}) has no embedding model (keyword-only), but an embedder "
                f"with model_key {embedder.model_key!r} was given; pass embedder=None"
            )
        return
    if embedder is None:
        raise MixedEmbeddingSpaces(
            f"knowledge base {kb.name!r} ({kb.id}) uses embedding model {kb.embedding_model_key!r}; an embedder "
            "for it is required"
        )
    if embedder.model_key != kb.embedding_model_key or int(embedder.dimension) != kb.embedding_dim:
        raise MixedEmbeddingSpaces(
            f"knowledge base {kb.name!r} ({kb.id}) uses embedding model {kb.embedding_model_key!r} "
            f"(dimension {kb.embedding_dim}) but the embedder is {embedder.model_key!r} "
            f"(dimension {embedder.dimension})"
        )
