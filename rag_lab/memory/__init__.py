"""Long-term memory across sessions: notes recalled by similarity, cited documents, interests."""

from __future__ import annotations

from rag_lab.memory.extract import explicit_memory, query_topics
from rag_lab.memory.store import MEMORY_PREAMBLE, AskerBackground, MemoryItem, MemoryStore, Recall, memory_prompt

__all__ = [
    "MEMORY_PREAMBLE",
    "AskerBackground",
    "MemoryItem",
    "MemoryStore",
    "Recall",
    "explicit_memory",
    "memory_prompt",
    "query_topics",
]
