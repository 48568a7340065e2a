"""Errors shared across layers: raised by the knowledge workspace and by retrieval over it.

They live here (the bottom layer) so that retrieval, which sits below ``knowledge`` in the import
layers (see ``tests/test_import_layers.py``), can raise them without importing the workspace.
``rag_lab.knowledge.workspace`` re-exports both under their old import path.
"""

from __future__ import annotations

__all__ = ["KnowledgeBaseNotFound", "MixedEmbeddingSpaces"]


class KnowledgeBaseNotFound(LookupError):
    """An unknown KB id or name; the message lists the known names."""


class MixedEmbeddingSpaces(ValueError):
    """Two different embedding model keys met (KB vs embedder, or KBs searched together)."""
