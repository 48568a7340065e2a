"""Turning a question into a pipeline request: the params a run uses (overrides checked against
the reranker's score range), the KBs a tenant may search, and the :class:`ChatManage` a run
starts from. :class:`LabRequests` is one of the mixins :class:`~rag_lab.lab.lab.Lab` is made of.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rag_lab.lab.config import CHAT_MODEL_ID, RERANK_MODEL_ID
from rag_lab.lab.embedders import LabEmbedders
from rag_lab.searchutil.language import rescorer_covers
from rag_lab.types.chat_manage import ChatManage, PipelineRequest, SearchTarget
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase


class LabRequests(LabEmbedders):
    """Params, KB scope and the initial :class:`ChatManage` of a lab's runs."""

    # -- the KBs a tenant sees --------------------------------------------------------------
    def visible_kbs(self, tenant_id: int = 0) -> list[KnowledgeBase]:
        """The KBs a tenant may search: its own and those shared with it (tenant 0: every KB)."""
        from rag_lab.retrieval.hybrid_search import can_view

        return [k for k in self.workspace.list_kbs() if can_view(k, tenant_id)]

    def _tenant_kb(self, ref: str, tenant_id: int) -> KnowledgeBase:
        """A KB by id or name as ``tenant_id`` sees it: another tenant's KB is "unknown", with a
        message that names neither the workspace nor the other KBs."""
        from rag_lab.knowledge.workspace import KnowledgeBaseNotFound
        from rag_lab.retrieval.hybrid_search import can_view

        if not tenant_id:
            return self.workspace.get_kb(ref)
        store = self.workspace.store
        kb = store.get_kb(ref) or store.get_kb_by_name(ref)
        if kb is None or not can_view(kb, tenant_id):
            raise KnowledgeBaseNotFound(f"unknown knowledge base {ref!r}")
        return kb

    # -- the request ------------------------------------------------------------------------
    def new_chat(
        self,
        question: str,
        kbs: list[str],
        params: PipelineParams | None = None,
        session_id: str = "",
        *,
        user_id: str = "lab",
        tenant_id: int = 0,
    ) -> ChatManage:
        """ChatManage initialised as spec §3.2.4 does for the lab's agent-less requests.
        ``user_id`` / ``tenant_id`` are the caller (the server's authenticated principal; tenant 0
        is the single-user lab, which sees every KB)."""
        p = params or self.params
        kb_objs = [self._tenant_kb(k, tenant_id) for k in kbs]
        req = PipelineRequest.from_params(
            p,
            query=question,
            session_id=session_id or str(uuid.uuid4()),
            user_id=user_id,
            tenant_id=tenant_id,
            knowledge_base_ids=[kb.id for kb in kb_objs],
            search_targets=[
                SearchTarget(type="knowledge_base", knowledge_base_id=kb.id, tenant_id=kb.tenant_id) for kb in kb_objs
            ],
            # an embedding re-scorer that cannot read the question's language keeps the search order
            rerank_model_id=RERANK_MODEL_ID
            if self.reranker is not None and rescorer_covers(self.reranker, question)
            else "",
            chat_model_id=CHAT_MODEL_ID,
            fallback_prompt=self.prompts.text(self.prompt_ids["fallback_prompt"]),
            language=self.language,
            chat_model_supports_vision=bool(getattr(self.chat_model, "supports_vision", False)),
            web_search_provider_id=type(self.services.web_search).__name__ if self.services.web_search else "",
        )
        req.summary_config.prompt = self.prompts.text(self.prompt_ids["system_prompt"])
        req.summary_config.context_template = self.prompts.text(self.prompt_ids["context_template"])
        rewrite = self.prompts.get(self.prompt_ids["rewrite"])
        req.rewrite_prompt_system, req.rewrite_prompt_user = rewrite.content, rewrite.user
        chat = ChatManage(request=req)
        chat.state.rewrite_query = question
        return chat

    # -- params -----------------------------------------------------------------------------
    @property
    def rerank_score_range(self) -> tuple[float, float] | None:
        """The scores the configured reranker declares it gives (``None``: not declared)."""
        model = getattr(self.reranker, "inner", self.reranker)
        return getattr(model, "score_range", None)

    def _reranker_name(self) -> str:
        model = getattr(self.reranker, "inner", self.reranker)
        return f"the reranker {getattr(model, 'model_id', type(model).__name__)}"

    def resolve_params(self, params: PipelineParams | Mapping[str, object] | None) -> PipelineParams:
        """The lab's params with ``params`` applied and checked before anything runs: unknown names
        fail with a did-you-mean, bad values name the field and value, thresholds outside the
        reranker's score range are refused with that range (:class:`ParamsError`)."""
        return self._params(params)

    def _params(
        self, params: PipelineParams | Mapping[str, object] | None, base: PipelineParams | None = None
    ) -> PipelineParams:
        """Overrides applied to ``base`` (default: the lab's params): unknown names fail with a
        did-you-mean, thresholds outside the reranker's score range are refused with that range."""
        from rag_lab.pipeline.knobs import apply_overrides, check_score_range

        base = base or self.params
        p = apply_overrides(base, params, source="params") if isinstance(params, Mapping) else (params or base)
        if p is not base:
            check_score_range(p, self.rerank_score_range, self._reranker_name())
        return p
