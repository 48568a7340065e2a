"""ChatManage: the one object that travels through the pipeline (spec §1.1, §1.7, §1.9)."""

from __future__ import annotations

import copy
import operator
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from rag_lab.types.diagnostics import StageDiagnostics
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import _ATOMS, SearchResult
from rag_lab.types.search_result import copy_value as _copy_value

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    from rag_lab.knowledge.graph import GraphData
    from rag_lab.stream.bus import EventBus

__all__ = [
    "ChatManage",
    "History",
    "PipelineContext",
    "PipelineRequest",
    "PipelineState",
    "SearchTarget",
    "SummaryConfig",
    "has_knowledge_retrieval_scope",
    "has_recall_threshold_override",
]


@dataclass(slots=True)
class SearchTarget:
    """One unit of search scope (a whole KB, or some of its documents)."""

    type: str = "knowledge_base"  # "knowledge_base" | "knowledge"
    knowledge_base_id: str = ""
    tenant_id: int = 0
    knowledge_ids: list[str] = field(default_factory=list)
    tag_ids: list[str] = field(default_factory=list)
    scope_tag_ids: list[str] = field(default_factory=list)
    disable_recall_thresholds: bool = False

    def recall_thresholds(self, vector: float, keyword: float) -> tuple[float, float]:
        return (0.0, 0.0) if self.disable_recall_thresholds else (vector, keyword)


def has_recall_threshold_override(targets: list[SearchTarget]) -> bool:
    return any(t is not None and t.disable_recall_thresholds for t in targets)


def has_knowledge_retrieval_scope(targets: list[SearchTarget], kb_ids: list[str], knowledge_ids: list[str]) -> bool:
    if any(k for k in kb_ids) or any(k for k in knowledge_ids):
        return True
    for t in targets:
        if t is None or not t.knowledge_base_id:
            continue
        if t.type == "knowledge_base" or t.knowledge_ids or t.tag_ids or t.scope_tag_ids:
            return True
    return False


@dataclass(slots=True)
class SummaryConfig:
    prompt: str = ""
    context_template: str = ""
    temperature: float = 0.3
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    max_completion_tokens: int = 2048
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    thinking: bool | None = None
    no_match_prefix: str = ""


@dataclass(slots=True)
class History:
    query: str = ""
    answer: str = ""
    create_at: float = 0.0
    knowledge_references: list[SearchResult] = field(default_factory=list)


@dataclass(slots=True)
class PipelineRequest:
    """Per-request configuration, written at request entry (the rerank stage alone retries with a
    lowered threshold and restores it)."""

    session_id: str = ""
    user_id: str = ""
    query: str = ""
    max_rounds: int = 5
    knowledge_base_ids: list[str] = field(default_factory=list)
    knowledge_ids: list[str] = field(default_factory=list)
    search_targets: list[SearchTarget] = field(default_factory=list)
    vector_threshold: float = 0.2
    keyword_threshold: float = 0.3
    embedding_top_k: int = 30
    vector_database: str = ""
    rerank_model_id: str = ""
    rerank_top_k: int = 30
    rerank_threshold: float = 0.3
    chat_model_id: str = ""
    summary_config: SummaryConfig = field(default_factory=SummaryConfig)
    fallback_strategy: str = "model"
    fallback_response: str = ""
    fallback_prompt: str = ""
    citation_enabled: bool | None = None
    enable_rewrite: bool = True
    enable_query_expansion: bool = True
    rewrite_prompt_system: str = ""
    rewrite_prompt_user: str = ""
    query_understand_model_id: str = ""
    faq_priority_enabled: bool = False
    faq_direct_answer_threshold: float = 0.9
    faq_score_boost: float = 1.2
    data_analysis_enabled: bool = False
    images: list[str] = field(default_factory=list)
    vlm_model_id: str = ""
    chat_model_supports_vision: bool = False
    #: :class:`~rag_lab.session.attachments.MessageAttachment` objects or mappings of their fields
    attachments: list[object] = field(default_factory=list)
    intent_prompt_overrides: dict[str, str] = field(default_factory=dict)
    tenant_id: int = 0
    web_search_enabled: bool = False
    web_search_provider_id: str = ""
    web_search_max_results: int = 10
    web_fetch_enabled: bool = False
    web_fetch_top_n: int = 3
    language: str = "English"
    #: every constant of the spec; immutable, so clones share it
    params: PipelineParams = field(default_factory=PipelineParams)

    @classmethod
    def from_params(cls, params: PipelineParams, **kwargs: Any) -> PipelineRequest:
        """Request fields defaulted from ``params`` (explicit kwargs win)."""
        req = cls(**kwargs)
        req.apply_params(params, keep=tuple(kwargs))
        return req

    def apply_params(self, params: PipelineParams, keep: tuple[str, ...] = ()) -> None:
        """Set ``params`` and every request field that defaults from it (except those in ``keep``)."""
        for name, value in _request_defaults(params).items():
            if name not in keep:
                setattr(self, name, value)
        self.params = params
        self.summary_config.temperature = params.temperature
        self.summary_config.max_completion_tokens = params.max_completion_tokens


def _request_defaults(params: PipelineParams) -> dict[str, object]:
    return {
        "max_rounds": params.max_rounds,
        "vector_threshold": params.vector_threshold,
        "keyword_threshold": params.keyword_threshold,
        "embedding_top_k": params.embedding_top_k,
        "rerank_top_k": params.rerank_top_k,
        "rerank_threshold": params.rerank_threshold,
        "fallback_strategy": params.fallback_strategy,
        "fallback_response": params.fallback_response,
        "citation_enabled": params.citation_enabled,
        "enable_rewrite": params.enable_rewrite,
        "enable_query_expansion": params.enable_query_expansion,
        "faq_priority_enabled": params.faq_priority_enabled,
        "faq_direct_answer_threshold": params.faq_direct_answer_threshold,
        "faq_score_boost": params.faq_score_boost,
        "data_analysis_enabled": params.data_analysis_enabled,
        "web_search_enabled": params.web_search_enabled,
        "web_search_max_results": params.web_search_max_results,
        "web_fetch_enabled": params.web_fetch_enabled,
        "web_fetch_top_n": params.web_fetch_top_n,
    }


@dataclass(slots=True)
class PipelineState:
    """Mutable intermediate data written by the stages."""

    rewrite_query: str = ""
    intent: str = ""
    history: list[History] = field(default_factory=list)
    search_result: list[SearchResult] = field(default_factory=list)
    rerank_result: list[SearchResult] = field(default_factory=list)
    merge_result: list[SearchResult] = field(default_factory=list)
    entity: list[str] = field(default_factory=list)
    entity_kb_ids: list[str] = field(default_factory=list)
    entity_knowledge: dict[str, str] = field(default_factory=dict)
    graph_result: GraphData | None = None
    user_content: str = ""
    rendered_contexts: str = ""
    chat_response: str | None = None
    image_description: str = ""
    quoted_context: str = ""
    system_prompt_override: str = ""
    memory_prompt: str = ""
    used_memories: list[object] = field(default_factory=list)
    #: retrieved images (data URIs) sent after the user's own images to a vision chat model
    context_images: list[str] = field(default_factory=list)
    #: lab-only diagnostics written by stages (MMR steps, score components, merge decisions)
    diagnostics: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class PipelineContext:
    event_bus: EventBus | None = None
    message_id: str = ""
    user_message_id: str = ""
    #: tasks a stage left running (the answer stream); the request waits for them
    background_tasks: list[object] = field(default_factory=list)
    #: set when the user stops the request (checked after every stage, before fallback)
    cancel_event: asyncio.Event | None = None

    def cancelled(self) -> bool:
        return self.cancel_event is not None and self.cancel_event.is_set()


# State fields that clone() copies (spec §1.1); everything else starts empty in the clone.
_CLONED_STATE = (
    "rewrite_query",
    "intent",
    "image_description",
    "quoted_context",
    "system_prompt_override",
    "memory_prompt",
    "used_memories",
    "rendered_contexts",
    "entity",
    "entity_kb_ids",
    "entity_knowledge",
)


@dataclass(slots=True)
class ChatManage:
    request: PipelineRequest = field(default_factory=PipelineRequest)
    state: PipelineState = field(default_factory=PipelineState)
    context: PipelineContext = field(default_factory=PipelineContext)

    def citations_enabled(self) -> bool:
        ce = self.request.citation_enabled
        return ce is None or bool(ce)

    def clone(self) -> ChatManage:
        """Deep copy of the request (search targets included) and of the state fields listed in
        spec §1.1. History, search/rerank/merge results, user content, chat response and the graph
        result are *not* copied, nor is the context (event bus, message ids)."""
        req = self._request_copy()
        state = PipelineState()
        for name in _CLONED_STATE:
            setattr(state, name, _copy_value(getattr(self.state, name)))
        return ChatManage(request=req, state=state, context=PipelineContext())

    def snapshot(self) -> ChatManage:
        """A full deep copy (state included, bus excluded) for the lab's per-event snapshots."""
        params, ctx = self.request.params, self.context
        self.request.params = None  # type: ignore[assignment]
        self.context = PipelineContext(message_id=ctx.message_id, user_message_id=ctx.user_message_id)
        try:
            snap = copy.deepcopy(self)
        finally:
            self.request.params, self.context = params, ctx
        snap.request.params = params
        return snap

    def snapshot_after(
        self, previous: ChatManage, copy_paths: Collection[str], share_paths: Collection[str] = ()
    ) -> ChatManage:
        """A copy-on-write :meth:`snapshot`: equal to ``self.snapshot()`` at a fraction of the cost.

        ``previous`` is a snapshot of this same chat taken earlier, and the paths name what was
        written since (contract names: ``"state.rerank_result"``, ``"state.diagnostics.rerank"``,
        ``"request.query"``; ``context.*`` is ignored, a snapshot keeps only the message ids).
        Fields in ``copy_paths`` are copied from this chat; fields in ``share_paths`` are this
        chat's own objects, which the caller guarantees nothing changes any more; every other field
        is ``previous``'s object. Snapshots taken this way share objects with each other: read them,
        and take ``snap.snapshot()`` of one before changing it.
        """
        fresh = [p for p in copy_paths if not p.startswith("context.")]
        shared = [p for p in share_paths if not p.startswith("context.")]
        if any(p.startswith("request.") for p in (*fresh, *shared)):
            request = self._request_copy()
        else:
            request = previous.request
        state = PipelineState(*_STATE_FIELDS(previous.state))
        diagnostics: dict[str, object] | None = None
        live = self.state
        for paths, copier in ((fresh, _copy_value), (shared, _same)):
            for path in paths:
                section, _, rest = path.partition(".")
                if section != "state":
                    continue
                name, _, key = rest.partition(".")
                if name != "diagnostics":
                    setattr(state, name, copier(getattr(live, name)))
                elif not key:
                    diagnostics = {k: copier(v) for k, v in live.diagnostics.items()}
                else:
                    if diagnostics is None:
                        diagnostics = dict(previous.state.diagnostics)
                    if key in live.diagnostics:
                        diagnostics[key] = copier(live.diagnostics[key])
                    else:
                        diagnostics.pop(key, None)
        if diagnostics is not None:
            state.diagnostics = diagnostics
        ctx = PipelineContext(message_id=self.context.message_id, user_message_id=self.context.user_message_id)
        return ChatManage(request=request, state=state, context=ctx)

    def _request_copy(self) -> PipelineRequest:
        """An independent copy of the request (what ``copy.deepcopy`` gives, several times faster),
        sharing only the params, which are immutable."""
        req = self.request
        return type(req)(
            *(
                v if name == "params" else _copy_request_value(v)
                for name, v in zip(_REQUEST_FIELDS, _REQUEST_GETTER(req))
            )
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view (used by captures and diffs)."""
        return {
            "request": _plain(self.request, skip=("params",)) | {"params": self.request.params.model_dump()},
            "state": _plain(self.state),
            "context": {"message_id": self.context.message_id, "user_message_id": self.context.user_message_id},
        }


_STATE_FIELDS = operator.attrgetter(*(f.name for f in fields(PipelineState)))
_REQUEST_FIELDS = tuple(f.name for f in fields(PipelineRequest))
_REQUEST_GETTER = operator.attrgetter(*_REQUEST_FIELDS)
#: the request's nested dataclasses: copied field by field (every field is an ``__init__`` argument)
_REQUEST_PARTS = {cls: tuple(f.name for f in fields(cls)) for cls in (SearchTarget, SummaryConfig)}


def _copy_request_value(value: Any) -> Any:
    if isinstance(value, _ATOMS):
        return value
    names = _REQUEST_PARTS.get(type(value))
    if names is not None:
        return type(value)(*(_copy_request_value(getattr(value, n)) for n in names))
    if type(value) is list:
        return [_copy_request_value(v) for v in value]
    return _copy_value(value)


def _same(value: object) -> object:
    return value


def _plain(obj: Any, skip: tuple[str, ...] = ()) -> Any:
    if isinstance(obj, SearchResult):
        return obj.to_dict()
    if isinstance(obj, StageDiagnostics):
        return _plain(obj.to_dict())
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj) if f.name not in skip}
    if isinstance(obj, list):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)
