"""The lab's knowledge bases: getting or creating one, and ingesting folders, documents and images
into it with the lab's embedder and graph extractor. :class:`LabKnowledge` is one of the mixins
:class:`~rag_lab.lab.lab.Lab` is made of.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from rag_lab.lab.config import LabConfigError
from rag_lab.lab.embedders import LabEmbedders
from rag_lab.searchutil.language import uncovered_reason

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.entities import LLMGraphExtractor, OfflineEntityExtractor
    from rag_lab.knowledge.ingest_common import IngestReport
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.lab.ask_options import KbOptions
    from rag_lab.observability.ledger import LedgerEmbedder


class LabKnowledge(LabEmbedders):
    """KBs and ingestion through the lab's workspace and models."""

    def kb(self, name: str, create: bool = True, *, sample: str = "", **kwargs: Unpack[KbOptions]) -> KnowledgeBase:
        """The KB ``name`` (created with ``kwargs`` when missing and ``create``; ``sample``, the
        text about to be ingested, chooses a new KB's embedder: :mod:`rag_lab.lab.embedders`). With
        ``tenant_id=N`` it must belong to tenant N; an unknown one's error lists only the KBs
        tenant N may see."""
        from rag_lab.knowledge.workspace import KnowledgeBaseExists, KnowledgeBaseNotFound

        tenant = kwargs.get("tenant_id")
        try:
            kb = self.workspace.get_kb(name, tenant_id=0 if create else tenant or 0)
        except KnowledgeBaseNotFound:
            if not create:
                raise
            # the embedder follows the text (``sample``: the documents about to be ingested): the
            # lab's, the multilingual one under ``embedder: auto``, or none (keyword-only); the
            # choice and its reason are kept in its metadata
            embedder, choice = self._choose_embedder(sample, name)
            # exist_ok: another process may create it at the same moment (same settings: fine)
            kb = self.workspace.create_kb(name, embedder, exist_ok=True, **kwargs)
            noted: dict[str, object] = {"embedder_choice": choice} if choice else {}
            if embedder is None and sample:
                noted["keyword_only"] = choice.get("reason") or uncovered_reason(sample, self.embedder, name)
            if any(k not in kb.metadata for k in noted):
                kb.metadata.update({k: v for k, v in noted.items() if k not in kb.metadata})
                self.workspace.store.update_kb(kb)
        if tenant is not None and kb.tenant_id != tenant:
            raise KnowledgeBaseExists(f"knowledge base {name!r} belongs to tenant {kb.tenant_id}, not {tenant}")
        return kb

    def graph_extractor(self) -> LLMGraphExtractor | OfflineEntityExtractor:
        """Entities and relations for a KB's graph: the chat model when it follows instructions,
        otherwise the offline extractor (jieba POS for Chinese, proper-noun spans for English)."""
        from rag_lab.knowledge.entities import LLMGraphExtractor, OfflineEntityExtractor

        if getattr(self.chat_model, "follows_instructions", False):
            return LLMGraphExtractor(self.chat_model, self.prompts, language=self.language)
        return OfflineEntityExtractor()

    def ingest(self, path: str | Path, kb: str, progress: bool = True, **kw: object) -> IngestReport:
        """Ingest a folder; ``strict=``, ``max_file_bytes=``, ``recursive=`` go to
        :func:`rag_lab.knowledge.ingestion.ingest_folder`. A new KB whose text the embedder does
        not cover is built keyword-only (:func:`rag_lab.searchutil.language.uncovered_reason`)."""
        target = self.kb(kb, sample=folder_sample(Path(path)))
        embedder = self._kb_embedder(target)
        kw.setdefault("prepare", self.prepare_texts and embedder is self.embedder)
        report = self.workspace.ingest_folder(
            target, Path(path), embedder, progress=progress, extractor=self.graph_extractor(), **kw
        )
        return _noted(report, target, self.embedder.model_key)

    def ingest_images(
        self, items: Iterable[object], kb: str, captions: Mapping[str, str] | Sequence[str] | None = None
    ) -> IngestReport:
        """Images with their captions / OCR text, searchable by image vector (needs ``lab.image_embedder``)."""
        from rag_lab.knowledge.images import ingest_images

        if self.image_embedder is None:
            raise LabConfigError("ingest_images needs an image embedder: set lab.image_embedder to an ImageEmbedder")
        return ingest_images(self.workspace, self.kb(kb), items, self.image_embedder, captions)

    def ingest_documents(self, docs: Iterable[object], kb: str, progress: bool = True) -> IngestReport:
        """Ingest documents (dicts with ``text``, ``title``, ``id``, ``metadata``); a new KB whose
        text the embedder does not cover is built keyword-only, as :meth:`ingest` does."""
        from rag_lab.searchutil.language import sample_text

        docs = list(docs)
        target = self.kb(kb, sample=sample_text(str(_field(d, "text")) for d in docs))
        embedder = self._kb_embedder(target)
        report = self.workspace.ingest_documents(
            target,
            docs,
            embedder,
            progress=progress,
            extractor=self.graph_extractor(),
            prepare=self.prepare_texts and embedder is self.embedder,
        )
        return _noted(report, target, self.embedder.model_key)

    def _kb_embedder(self, kb: KnowledgeBase) -> LedgerEmbedder | None:
        """The embedder a KB's chunks are written with: none for a keyword-only KB. The texts the
        re-scorer and the answerer will embed are prepared only with the lab's own embedder (theirs)."""
        return self._embedder_for(kb) if kb.vector_enabled else None


#: text-like files read for the language sample of a folder (the first ``per_text`` characters)
_SAMPLE_SUFFIXES = (".md", ".markdown", ".txt", ".text", ".rst", ".html", ".htm", ".csv", ".json", ".jsonl", ".xml")


def folder_sample(path: Path, max_files: int = 200, per_text: int = 2000) -> str:
    """The beginning of the folder's first text-like files (or of the file itself): enough to
    tell the script a corpus is written in."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    out: list[str] = []
    for p in files:
        if len(out) >= max_files:
            break
        if p.suffix.lower() in _SAMPLE_SUFFIXES:
            try:
                with p.open("rb") as fh:
                    out.append(fh.read(per_text * 4).decode("utf-8", errors="ignore")[:per_text])
            except OSError:
                continue
    return "\n".join(out)


def _field(doc: object, name: str) -> object:
    return doc.get(name, "") if isinstance(doc, dict) else getattr(doc, name, "")


def _noted(report: IngestReport, kb: KnowledgeBase, main_key: str) -> IngestReport:
    """The ingestion report, with the reason a KB is keyword-only, or embedded with the
    multilingual embedder, among its warnings (the lab's own embedder is not a warning)."""
    choice = kb.metadata.get("embedder_choice") or {}
    reasons = [kb.metadata.get("keyword_only", "")]
    if isinstance(choice, dict) and choice.get("model_key") not in (None, "", main_key):
        reasons.append(str(choice.get("reason", "")))
    warnings = getattr(report, "warnings", None)
    for reason in reasons:
        if reason and isinstance(warnings, list) and reason not in warnings:
            warnings.append(reason)
    return report
