"""The lab's knowledge bases: getting or creating one, and ingesting folders, documents and images
into it with the lab's embedder and graph extractor. :class:`LabKnowledge` is one of the mixins
:class:`~rag_lab.lab.lab.Lab` is made of.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rag_lab.lab.config import LabConfigError
from rag_lab.lab.parts import LabParts


class LabKnowledge(LabParts):
    """KBs and ingestion through the lab's workspace and models."""

    def kb(self, name: str, create: bool = True, **kwargs: Any) -> Any:
        """The KB ``name`` (created with ``kwargs`` when missing and ``create``). With
        ``tenant_id=N`` it must belong to tenant N; an unknown one's error lists only the KBs
        tenant N may see."""
        from rag_lab.knowledge.workspace import KnowledgeBaseExists, KnowledgeBaseNotFound

        tenant = kwargs.get("tenant_id")
        try:
            kb = self.workspace.get_kb(name, tenant_id=0 if create else tenant or 0)
        except KnowledgeBaseNotFound:
            if not create:
                raise
            # exist_ok: another process may create it at the same moment (same settings: fine)
            kb = self.workspace.create_kb(name, self.embedder, exist_ok=True, **kwargs)
        if tenant is not None and kb.tenant_id != tenant:
            raise KnowledgeBaseExists(f"knowledge base {name!r} belongs to tenant {kb.tenant_id}, not {tenant}")
        return kb

    def graph_extractor(self) -> Any:
        """Entities and relations for a KB's graph: the chat model when it follows instructions,
        otherwise the offline extractor (jieba POS for Chinese, proper-noun spans for English)."""
        from rag_lab.knowledge.entities import LLMGraphExtractor, OfflineEntityExtractor

        if getattr(self.chat_model, "follows_instructions", False):
            return LLMGraphExtractor(self.chat_model, self.prompts, language=self.language)
        return OfflineEntityExtractor()

    def ingest(self, path: str | Path, kb: str, progress: bool = True, **kw: Any) -> Any:
        """Ingest a folder; ``strict=``, ``max_file_bytes=``, ``recursive=`` go to
        :func:`rag_lab.knowledge.ingestion.ingest_folder`."""
        kw.setdefault("prepare", self.prepare_texts)
        return self.workspace.ingest_folder(
            self.kb(kb), Path(path), self.embedder, progress=progress, extractor=self.graph_extractor(), **kw
        )

    def ingest_images(self, items: Iterable[Any], kb: str, captions: Any = None) -> Any:
        """Images with their captions / OCR text, searchable by image vector (needs ``lab.image_embedder``)."""
        from rag_lab.knowledge.images import ingest_images

        if self.image_embedder is None:
            raise LabConfigError("ingest_images needs an image embedder: set lab.image_embedder to an ImageEmbedder")
        return ingest_images(self.workspace, self.kb(kb), items, self.image_embedder, captions)

    def ingest_documents(self, docs: Iterable[Any], kb: str, progress: bool = True) -> Any:
        return self.workspace.ingest_documents(
            self.kb(kb),
            docs,
            self.embedder,
            progress=progress,
            extractor=self.graph_extractor(),
            prepare=self.prepare_texts,
        )
