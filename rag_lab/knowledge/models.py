"""Knowledge-base data model: KB, Knowledge (a document), Chunk (with parent/child links)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class KnowledgeBase:
    id: str
    name: str
    description: str = ""
    type: str = "document"  # "document" | "faq" | "wiki"
    tenant_id: int = 1
    #: identity of the embedding space, "name|base_url" (spec §4.4.1); "" = no vector index
    embedding_model_key: str = ""
    embedding_dim: int = 0
    vector_enabled: bool = True
    keyword_enabled: bool = True
    wiki_enabled: bool = False
    #: chunking settings used at ingestion
    chunk_size: int = 512
    chunk_overlap: int = 64
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(slots=True)
class Knowledge:
    """One document of a KB."""

    id: str
    knowledge_base_id: str
    title: str = ""
    file_name: str = ""
    file_type: str = ""
    source: str = "file"
    channel: str = ""
    description: str = ""
    enable_status: str = "enabled"
    metadata: dict[str, str] = field(default_factory=dict)
    custom_metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    created_at: float = 0.0


@dataclass(slots=True)
class Chunk:
    id: str
    knowledge_id: str
    knowledge_base_id: str
    content: str
    chunk_index: int = 0
    chunk_type: str = "text"
    start_at: int = 0
    end_at: int = 0
    parent_chunk_id: str = ""
    pre_chunk_id: str = ""
    next_chunk_id: str = ""
    is_enabled: bool = True
    index_status: str = "indexed"  # "processing" | "failed" | "indexed"
    image_info: str = ""
    #: chunk-level metadata, e.g. {"generated_questions": [...]} or FAQ metadata
    metadata: dict[str, Any] = field(default_factory=dict)
    content_revision: int = 0
    tag_id: str = ""


@dataclass(slots=True)
class FAQEntry:
    """FAQ chunk metadata (spec §1.9 FAQChunkMetadata)."""

    standard_question: str
    answers: list[str] = field(default_factory=list)
    similar_questions: list[str] = field(default_factory=list)
    negative_questions: list[str] = field(default_factory=list)
    answer_strategy: str = ""
    version: int = 1
    source: str = ""

    def to_metadata(self) -> dict[str, object]:
        return {
            "standard_question": self.standard_question,
            "similar_questions": list(self.similar_questions),
            "negative_questions": list(self.negative_questions),
            "answers": list(self.answers),
            "answer_strategy": self.answer_strategy,
            "version": self.version,
            "source": self.source,
        }
