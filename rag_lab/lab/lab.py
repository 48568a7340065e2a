"""The Lab: the facade a notebook or the CLI starts from (config, knowledge bases, models, params).

``lab.ask(question)`` runs the whole pipeline and returns a :class:`Run` with the answer, the
references, every stream event, per-stage timings and a ChatManage snapshot after every stage.

Kept whole: the Lab facade, one class whose methods share the config, workspace, services and stream
manager, with the Run it returns beside it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from rag_lab.pipeline.container import Services, build_event_manager
from rag_lab.pipeline.orchestrator import StageTiming
from rag_lab.pipeline.qa import QAOutcome, run_knowledge_qa
from rag_lab.pipeline.snapshots import SnapshotPlan, SnapshotTaker
from rag_lab.prompts.templates import REPO_ROOT, PromptTemplates
from rag_lab.stream.bus import BusEvent
from rag_lab.stream.manager import stopped_answer
from rag_lab.types.chat_manage import ChatManage, PipelineRequest, SearchTarget
from rag_lab.types.events import EventType
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import StreamEvent

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.stepper import Stepper

DEFAULT_CONFIG = REPO_ROOT / "config" / "lab.yaml"
CHAT_MODEL_ID = "chat"
RERANK_MODEL_ID = "rerank"
_TOP_KEYS = {
    "ingest",
    "workspace",
    "store",
    "language",
    "models",
    "prompts",
    "stream_manager",
    "params",
    "tracing",
    "prices",
    "memory",
    "web",
    "engine",
    "knowledge_bases",
    "server",
    "vector_cache",
}


class LabConfigError(ValueError):
    pass


#: awaited after every stage with (event, snapshot); the step-through pauses there
StagePause = Callable[[EventType, ChatManage], Awaitable[None]]


@dataclass
class Run:
    """Everything one question produced."""

    question: str
    answer: str
    references: list[SearchResult]
    events: list[StreamEvent]
    timings: list[StageTiming]
    snapshots: dict[str, ChatManage]
    stages: list[str]
    error: str = ""
    is_fallback: bool = False
    session_id: str = ""
    message_id: str = ""
    total_ms: float = 0.0
    params: PipelineParams = field(default_factory=PipelineParams)
    ledger: Any = None  # rag_lab.observability.ledger.Ledger: time, model calls, tokens, cost
    #: params that could not change this run's outcome (rag_lab.pipeline.knobs), as sentences
    warnings: list[str] = field(default_factory=list)
    #: ``state.diagnostics`` as the run left it (kept with or without snapshots: the gold funnel reads it)
    diagnostics: dict[str, Any] = field(default_factory=dict)

    @property
    def degraded(self) -> bool:
        """The model failed and the answer is the fallback (partial text kept): ``error`` says why."""
        return bool(self.error) and self.is_fallback

    def state(self, event: EventType | str) -> ChatManage:
        """The ChatManage snapshot taken right after ``event`` (or ``"final"``)."""
        key = str(event)
        if key not in self.snapshots:
            raise KeyError(f"no snapshot for '{key}'; this run has: {', '.join(self.snapshots)}")
        return self.snapshots[key]

    @property
    def cited_chunk_ids(self) -> list[str]:
        from rag_lab.modelcontext import cited_chunk_ids

        return cited_chunk_ids(self.answer)

    @property
    def retrieved_doc_ids(self) -> list[str]:
        """Document ids of the final contexts, in rank order, each once (for retrieval metrics)."""
        out: list[str] = []
        for r in self.references:
            if r.knowledge_id and r.knowledge_id not in out:
                out.append(r.knowledge_id)
        return out

    def frame(self, which: str = "search", **kw: Any):
        """Search / fusion / rerank / merge / final results with every score component (pandas);
        ``which="funnel"`` with ``gold_ids=[...]``: where each gold document is at every stage."""
        from rag_lab.lab.frames import frame

        return frame(self, which, **kw)

    def save(self, path: str | Path, **kw: Any) -> Path:
        """Save as a versioned JSONL capture (replayable without any model)."""
        from rag_lab.lab.capture import save_capture

        return save_capture(self, path, **kw)

    def timings_frame(self):
        """One row per stage: event, start, ``duration_ms`` (background work included) and
        ``background_ms``, error (pandas)."""
        from dataclasses import asdict

        import pandas as pd

        return pd.DataFrame([asdict(t) for t in self.timings])


def ensure_owned_session(store: Any, session_id: str, user_id: str, tenant_id: int = 0) -> Any:
    """The session, created for (user, tenant) when missing. A session owned by anyone else
    raises ``SessionNotFound``, exactly as a missing one would read (its history is never loaded)."""
    session = store.ensure_session(session_id, user_id, tenant_id=tenant_id)
    owner = (getattr(session, "user_id", user_id), getattr(session, "tenant_id", tenant_id))
    if owner != (user_id, tenant_id):
        from rag_lab.session.sqlite_store import SessionNotFound

        raise SessionNotFound(f"session '{session_id}' not found")
    return session


#: the environment variable naming a vector cache file shared by every workspace that does not
#: name its own (``vector_cache.path``): vectors are a pure function of (model key, text)
VECTOR_CACHE_ENV = "RAG_LAB_VECTOR_CACHE"


def vector_cache_from_config(cfg: Any, root: Path, source: str) -> Any:
    """The workspace's :class:`~rag_lab.models.vector_cache.VectorCache` from the ``vector_cache``
    config key: ``true`` / absent (the default bound), ``{max_mb: N, path: FILE}``, or ``false``
    (none: vectors are cached in memory only, for the life of the process). The file is ``path``
    (``~`` expanded, relative to the workspace), else ``$RAG_LAB_VECTOR_CACHE``, else
    ``<workspace>/vectors.sqlite``."""
    from rag_lab.models.vector_cache import DEFAULT_MAX_BYTES, FILE_NAME, VectorCache

    if cfg is False or cfg is None:
        return None
    if cfg is True:
        cfg = {}
    if not isinstance(cfg, Mapping) or set(cfg) - {"max_mb", "path"}:
        raise LabConfigError(f"{source}: vector_cache: expected true, false or {{max_mb: N, path: FILE}}, got {cfg!r}")
    max_mb = cfg.get("max_mb")
    if max_mb is not None and (isinstance(max_mb, bool) or not isinstance(max_mb, (int, float)) or max_mb < 0):
        raise LabConfigError(f"{source}: vector_cache.max_mb must be a number >= 0, got {max_mb!r}")
    path = cfg.get("path")
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise LabConfigError(f"{source}: vector_cache.path must be a file path, got {path!r}")
    where = path or os.environ.get(VECTOR_CACHE_ENV, "").strip() or FILE_NAME
    file = Path(root) / Path(where).expanduser()  # an absolute path replaces the workspace's
    if file.is_dir():
        raise LabConfigError(
            f"{source}: vector_cache: {file} is a folder; name the cache file (e.g. {file / FILE_NAME})"
        )
    max_bytes = DEFAULT_MAX_BYTES if max_mb is None else int(max_mb * 1024 * 1024)
    return VectorCache(file, max_bytes=max_bytes)


def _run_sync(coro_factory: Callable[[], Any]) -> Any:
    from rag_lab.asyncutil import run_sync

    return run_sync(coro_factory)


class Lab:
    def __init__(
        self, config: Mapping[str, Any] | None = None, source: str = "<dict>", workspace: str | Path | None = None
    ) -> None:
        cfg = dict(config or {})
        unknown = sorted(set(cfg) - _TOP_KEYS)
        if unknown:
            raise LabConfigError(
                f"{source}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_TOP_KEYS))}"
            )
        self.config = cfg
        self.params = PipelineParams.from_mapping(cfg.get("params") or {}, source=f"{source}: params")
        self.language = str(cfg.get("language") or "English")
        root = Path(workspace if workspace is not None else cfg.get("workspace") or ".rag_lab")
        from rag_lab.knowledge.store_config import StoreConfig

        try:
            #: where KBs, documents, chunks, sessions and messages live (the ``store`` section)
            self.store_config = StoreConfig.from_config(cfg.get("store"), source)
        except ValueError as exc:
            raise LabConfigError(str(exc)) from None
        from rag_lab.knowledge.workspace import Workspace
        from rag_lab.models.embedding import CachedEmbedder
        from rag_lab.models.registry import build_chat_model, build_embedder, build_reranker
        from rag_lab.observability.ledger import LedgerChatModel, LedgerEmbedder, LedgerReranker, PriceTable
        from rag_lab.observability.tracing import build_tracer
        from rag_lab.retrieval.hybrid_search import HybridSearcher

        models = dict(cfg.get("models") or {})
        #: the workspace's persistent vector cache (``None``: ``vector_cache: false``)
        self.vector_cache = vector_cache_from_config(cfg.get("vector_cache", True), root, source)
        try:
            # one cached embedder per lab: ingest, the query, the re-scorer and the answerer share
            # its memory and the workspace's vector cache, so a text is embedded once per model
            cached = CachedEmbedder(
                build_embedder(models.get("embedder") or {"type": "onnx-minilm"}), store=self.vector_cache
            )
            # every model is wrapped so each run's ledger counts its calls, tokens and cost
            self.embedder = LedgerEmbedder(cached)
            self.reranker = (
                LedgerReranker(
                    build_reranker(models.get("reranker") or {"type": "embedding-rescorer"}, embedder=cached)
                )
                if models.get("reranker", True) is not None
                else None
            )
            self.chat_model = LedgerChatModel(
                build_chat_model(models.get("chat") or {"type": "extractive"}, embedder=cached)
            )
        except ValueError as exc:
            raise LabConfigError(f"{source}: models: {exc}") from None
        self.prepare_texts = prepare_texts_for(cfg.get("ingest"), models, source)
        from rag_lab.pipeline.knobs import check_score_range

        try:
            check_score_range(self.params, self.rerank_score_range, self._reranker_name())
        except ValueError as exc:
            raise LabConfigError(f"{source}: params: {exc}") from None
        try:
            self.prices = PriceTable(cfg.get("prices") or {})
            self.tracer = build_tracer(cfg.get("tracing"))
            from rag_lab.observability.ledger import Ledger

            #: model calls made outside a question's run (session titles started by the server)
            self.background_ledger = Ledger(self.prices)
        except ValueError as exc:
            raise LabConfigError(f"{source}: {exc}") from None
        self.prompts = PromptTemplates()
        pcfg = dict(cfg.get("prompts") or {})
        self.prompt_ids = {
            "system_prompt": pcfg.get("system_prompt", "default_kb"),
            "context_template": pcfg.get("context_template", "default_context"),
            "rewrite": pcfg.get("rewrite", "default_rewrite"),
            "fallback_prompt": pcfg.get("fallback_prompt", "default_fallback_prompt"),
        }
        for key, tid in self.prompt_ids.items():
            try:
                self.prompts.get(tid)
            except ValueError as exc:
                raise LabConfigError(f"{source}: prompts.{key}: {exc}") from None
        self.workspace = Workspace(
            root, store=self.store_config.knowledge_location(root), store_outage_s=self.store_config.outage_s
        )
        # an index found disagreeing with the store re-embeds what it lacks with this lab's model
        self.workspace.embedder_for = lambda kb: (
            self.embedder if getattr(kb, "embedding_model_key", "") == self.embedder.model_key else None
        )
        from rag_lab.retrieval.engines import EngineConfigError, EngineRouter

        try:
            #: which retrieval engine serves each KB (``engine`` / ``knowledge_bases`` in the config)
            self.engines = EngineRouter(self.workspace, cfg.get("engine"), cfg.get("knowledge_bases"), source=source)
        except EngineConfigError as exc:
            raise LabConfigError(str(exc)) from None
        self.workspace.mirror_for = self.engines.mirror_for
        #: optional image-text embedder (an ``ImageEmbedder``: text and image towers in one space)
        #: for image recall; none ships offline, so it is set by the user (``lab.image_embedder = …``)
        self.image_embedder: Any = None
        from rag_lab.memory import MemoryStore
        from rag_lab.session.sqlite_store import SQLiteSessionStore

        # sessions and messages persist next to the knowledge bases; long-term memory is opt-in
        # (its affinity boost makes results depend on earlier questions)
        self.sessions = SQLiteSessionStore(
            self.store_config.sessions_location(self.workspace.root), outage_s=self.store_config.outage_s
        )
        mem_cfg = dict(cfg.get("memory") or {})
        self.memory = MemoryStore(self.workspace.root / "memory.sqlite", cached) if mem_cfg.get("enabled") else None
        self.services = Services(
            workspace=self.workspace,
            searcher=HybridSearcher(
                self.workspace,
                self._embedder_for,
                self.params,
                engine_for=self.engines.engine_for,
                image_embedder_for=lambda kb: self.image_embedder,
            ),
            embedder_for=self._embedder_for,
            chat_models={CHAT_MODEL_ID: self.chat_model},
            rerank_models={RERANK_MODEL_ID: self.reranker} if self.reranker is not None else {},
            prompts=self.prompts,
            messages=self.sessions,
            memory=self.memory,
            tracer=self.tracer,
            graph=self.workspace.graph,
        )
        from rag_lab.web import WebConfigError, web_services_from_config

        try:
            self.services.web_search, self.services.web_fetcher = web_services_from_config(
                cfg.get("web"), source=f"{source}: web"
            )
        except WebConfigError as exc:
            raise LabConfigError(str(exc)) from None
        self._manager: Any = None
        self._snapshot_plan: SnapshotPlan | None = None
        from rag_lab.stream.factory import build_stream_manager

        try:
            self.stream_manager = build_stream_manager(cfg.get("stream_manager"))
        except ValueError as exc:
            raise LabConfigError(f"{source}: stream_manager: {exc}") from None

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_config(cls, path: str | Path | Mapping[str, Any] | None = None, **overrides: Any) -> Lab:
        """From a YAML file (default ``config/lab.yaml``) or a dict; ``overrides`` replace top keys
        (``workspace=...``, ``params={...}``)."""
        if isinstance(path, Mapping):
            cfg, source = dict(path), "<dict>"
        else:
            p = Path(path) if path is not None else DEFAULT_CONFIG
            try:
                cfg = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
            except FileNotFoundError:
                raise LabConfigError(f"{p}: config file not found") from None
            except yaml.YAMLError as exc:
                raise LabConfigError(f"{p}: invalid YAML: {exc}") from None
            if not isinstance(cfg, dict):
                raise LabConfigError(f"{p}: expected a mapping at the top level")
            source = str(p)
        workspace = overrides.pop("workspace", None)
        cfg.update(overrides)
        return cls(cfg, source=source, workspace=workspace)

    def _embedder_for(self, kb: Any):
        key = getattr(kb, "embedding_model_key", "")
        if key and key != self.embedder.model_key:
            raise LabConfigError(
                f"knowledge base '{kb.name}' was built with embeddings '{key}', but this lab uses "
                f"'{self.embedder.model_key}'"
            )
        return self.embedder

    # -- knowledge --------------------------------------------------------------------------
    def kb(self, name: str, create: bool = True, **kwargs: Any):
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

    def ingest(self, path: str | Path, kb: str, progress: bool = True, **kw: Any):
        """Ingest a folder; ``strict=``, ``max_file_bytes=``, ``recursive=`` go to
        :func:`rag_lab.knowledge.ingestion.ingest_folder`."""
        kw.setdefault("prepare", self.prepare_texts)
        return self.workspace.ingest_folder(
            self.kb(kb), Path(path), self.embedder, progress=progress, extractor=self.graph_extractor(), **kw
        )

    def ingest_images(self, items: Iterable[Any], kb: str, captions: Any = None):
        """Images with their captions / OCR text, searchable by image vector (needs ``lab.image_embedder``)."""
        from rag_lab.knowledge.images import ingest_images

        if self.image_embedder is None:
            raise LabConfigError("ingest_images needs an image embedder: set lab.image_embedder to an ImageEmbedder")
        return ingest_images(self.workspace, self.kb(kb), items, self.image_embedder, captions)

    def ingest_documents(self, docs: Iterable[Any], kb: str, progress: bool = True):
        return self.workspace.ingest_documents(
            self.kb(kb),
            docs,
            self.embedder,
            progress=progress,
            extractor=self.graph_extractor(),
            prepare=self.prepare_texts,
        )

    # -- asking -----------------------------------------------------------------------------
    def visible_kbs(self, tenant_id: int = 0) -> list[Any]:
        """The KBs a tenant may search: its own and those shared with it (tenant 0: every KB)."""
        from rag_lab.retrieval.hybrid_search import can_view

        return [k for k in self.workspace.list_kbs() if can_view(k, tenant_id)]

    def _tenant_kb(self, ref: str, tenant_id: int) -> Any:
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
            rerank_model_id=RERANK_MODEL_ID if self.reranker is not None else "",
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

    @property
    def rerank_score_range(self) -> tuple[float, float] | None:
        """The scores the configured reranker declares it gives (``None``: not declared)."""
        model = getattr(self.reranker, "inner", self.reranker)
        return getattr(model, "score_range", None)

    def _reranker_name(self) -> str:
        model = getattr(self.reranker, "inner", self.reranker)
        return f"the reranker {getattr(model, 'model_id', type(model).__name__)}"

    def resolve_params(self, params: PipelineParams | Mapping[str, Any] | None) -> PipelineParams:
        """The lab's params with ``params`` applied and checked before anything runs: unknown names
        fail with a did-you-mean, bad values name the field and value, thresholds outside the
        reranker's score range are refused with that range (:class:`ParamsError`)."""
        return self._params(params)

    def _params(
        self, params: PipelineParams | Mapping[str, Any] | None, base: PipelineParams | None = None
    ) -> PipelineParams:
        """Overrides applied to ``base`` (default: the lab's params): unknown names fail with a
        did-you-mean, thresholds outside the reranker's score range are refused with that range."""
        from rag_lab.pipeline.knobs import apply_overrides, check_score_range

        base = base or self.params
        p = apply_overrides(base, params, source="params") if isinstance(params, Mapping) else (params or base)
        if p is not base:
            check_score_range(p, self.rerank_score_range, self._reranker_name())
        return p

    async def aask(
        self,
        question: str,
        kb: str | list[str] | None = None,
        params: PipelineParams | Mapping[str, Any] | None = None,
        session_id: str = "",
        on_event: Callable[[BusEvent], None] | None = None,
        snapshots: bool = True,
        message_id: str = "",
        cancel_event: Any = None,
        pause: StagePause | None = None,
        user_id: str = "lab",
        tenant_id: int = 0,
        persist: bool = True,
        retrieval_only: bool = False,
    ) -> Run:
        """Run the pipeline for one question. ``retrieval_only``: stop after the search stage (no
        rerank, merge or answer): the run's references are the search stage's output, in its order. ``cancel_event`` (an ``asyncio.Event``) stops it
        after the current stage / stream chunk, like the user's stop button; ``pause`` is awaited
        after every stage with (event, snapshot) — the step-through uses it. ``user_id`` and
        ``tenant_id`` name the caller: without ``kb`` the tenant's visible KBs are searched, a KB
        of another tenant is unknown, and a session of another user raises
        :class:`~rag_lab.session.sqlite_store.SessionNotFound`. ``persist=False`` writes neither
        the user nor the assistant message (nor runs §9.1's after-completion steps): the history
        of ``session_id`` is still read, the turn itself leaves nothing in ``sessions.sqlite``
        (evaluations ask that way unless told to keep sessions)."""
        p = self._params(params)
        kbs = [kb] if isinstance(kb, str) else list(kb or [k.name for k in self.visible_kbs(tenant_id)])
        chat = self.new_chat(question, kbs, p, session_id, user_id=user_id, tenant_id=tenant_id)
        chat.context.message_id = message_id or str(uuid.uuid4())
        chat.context.cancel_event = cancel_event
        events = None
        if retrieval_only:
            from rag_lab.pipeline.orchestrator import build_event_list

            full = build_event_list(chat)
            if EventType.CHUNK_SEARCH_PARALLEL not in full:
                raise ValueError("retrieval_only needs a question with a knowledge base to search")
            events = full[: full.index(EventType.CHUNK_SEARCH_PARALLEL) + 1]
            persist = False  # nothing is answered: no turn to keep
        if persist:
            self._open_turn(chat, user_id, tenant_id)
        return await self._execute(chat, events, {}, snapshots, on_event, pause, remember=persist)

    def _open_turn(self, chat: ChatManage, user_id: str, tenant_id: int) -> None:
        """The session (created for the caller when new) and the user message, which exists
        before the run (§3.1 step 1)."""
        store = self.services.messages
        if store is None:
            return
        ensure_owned_session(store, chat.request.session_id, user_id, tenant_id)
        chat.context.user_message_id = store.insert_message(
            chat.request.session_id,
            "user",
            chat.request.query,
            chat.context.message_id,
            image_urls=list(chat.request.images),
        )

    async def arerun(
        self,
        run: Run,
        from_stage: EventType | str,
        params: PipelineParams | Mapping[str, Any] | None = None,
        on_event: Callable[[BusEvent], None] | None = None,
    ) -> Run:
        """Run ``run`` again from ``from_stage`` with changed params, reusing the state every
        earlier stage produced (their snapshots). Unchanged params reproduce the run."""
        stage = str(from_stage)
        if stage not in run.stages:
            raise ValueError(f"stage '{stage}' is not in this run's stages: {', '.join(run.stages)}")
        i = run.stages.index(stage)
        if i == 0:
            raise ValueError(f"'{stage}' is the first stage: use ask() to run the whole pipeline again")
        before = run.stages[i - 1]
        if before not in run.snapshots:
            raise ValueError(f"run has no snapshot after '{before}' (it was asked with snapshots=False)")
        chat = run.snapshots[before].snapshot()
        chat.request.apply_params(self._params(params, run.params))
        chat.context.message_id = str(uuid.uuid4())
        upstream = {k: v for k, v in run.snapshots.items() if k in run.stages[:i]}
        events = [EventType(e) for e in run.stages[i:]]
        return await self._execute(chat, events, upstream, True, on_event, None, remember=False)

    def rerun(
        self, run: Run, from_stage: EventType | str, params: PipelineParams | Mapping[str, Any] | None = None
    ) -> Run:
        """Synchronous :meth:`arerun`."""
        return _run_sync(lambda: self.arerun(run, from_stage, params))

    def step(self, question: str, kb: str | list[str] | None = None, **kwargs: Any) -> Stepper:
        """Step through a question stage by stage (``st.next()``, ``await st.anext()``).

        >>> import tempfile
        >>> lab = Lab.from_config(workspace=tempfile.mkdtemp())
        >>> _ = lab.ingest_documents([{"id": "bw-1874", "text": "Mara Quill built the lighthouse in 1874."}], kb="demo")
        >>> st = lab.step("Who built the lighthouse?", kb="demo")
        >>> st.next()
        StageView(load_history: search=0 rerank=0 merge=0)
        >>> view = st.run_to("chunk_rerank")
        >>> [r.knowledge_id for r in view.state.state.rerank_result]
        ['bw-1874']
        >>> st.finish().references[0].knowledge_id
        'bw-1874'
        """
        from rag_lab.lab.stepper import Stepper

        return Stepper(self, question, kb, **kwargs)

    async def _execute(
        self,
        chat: ChatManage,
        events: list[EventType] | None,
        snaps: dict[str, ChatManage],
        snapshots: bool,
        on_event: Callable[[BusEvent], None] | None,
        pause: StagePause | None,
        remember: bool,
    ) -> Run:
        if self._manager is None:  # plugins read the services at call time: build the chain once
            self._manager = build_event_manager(self.services)
            self._snapshot_plan = SnapshotPlan.from_manager(self._manager)
        manager = self._manager
        taker = SnapshotTaker(self._snapshot_plan)  # copy-on-write snapshots from the contracts

        async def on_stage(event: EventType, c: ChatManage, err: Any) -> None:
            if snapshots or pause is not None:
                snap = taker.take(event, c)
                if snapshots:
                    snaps[str(event)] = snap
                if pause is not None:
                    await pause(event, snap)

        from rag_lab.observability.ledger import Ledger, use_ledger
        from rag_lab.pipeline.knobs import run_warnings
        from rag_lab.searchutil.language import language_warning

        ledger = Ledger(self.prices)
        # a remembered turn is saved before its ``complete`` is stored: whoever reads the session
        # after ``complete`` finds the assistant message
        hold = remember and self.services.messages is not None
        with use_ledger(ledger):
            outcome: QAOutcome = await run_knowledge_qa(
                chat, self.services, manager, self.stream_manager, on_stage, on_event, events=events, hold_complete=hold
            )
        for t in outcome.timings:
            ledger.stage_ms[t.event] = ledger.stage_ms.get(t.event, 0.0) + t.duration_ms
        if snapshots:
            snaps["final"] = taker.final(chat)
        sid, mid = chat.request.session_id, chat.context.message_id
        stored, _ = self.stream_manager.get_events(sid, mid, 0)
        stopped = stopped_answer(stored)
        if stopped is not None:  # stopped through the log (another replica): the answer is what it holds
            outcome.answer, outcome.cancelled = stopped, True

        def release() -> None:
            """Store the held ``complete`` (once): right after the turn is saved, before §9.1's
            step 2; never after a ``stop`` (the log takes nothing more)."""
            held, outcome.held = outcome.held, []
            for ev in held if stopped is None else []:
                self.stream_manager.append_event(sid, mid, ev)
                stored.append(ev)

        if remember:
            await self._remember_turn(chat, outcome, release)
        release()
        return Run(
            question=chat.request.query,
            answer=outcome.answer,
            references=[r.copy() for r in (chat.state.merge_result or _searched(chat, outcome))],
            events=stored,
            timings=outcome.timings,
            snapshots=snaps,
            stages=[str(e) for e in outcome.events],
            error=str(outcome.error) if outcome.error else outcome.model_error,
            is_fallback=outcome.is_fallback,
            session_id=chat.request.session_id,
            message_id=chat.context.message_id,
            total_ms=outcome.total_ms,
            params=chat.request.params,
            ledger=ledger,
            warnings=[str(w) for w in run_warnings(chat.request.params, chat.state.diagnostics)]
            + [w for w in [language_warning(chat.request.query, self.embedder, "this question")] if w],
            diagnostics=chat.state.diagnostics,
        )

    def ask(self, question: str, kb: str | list[str] | None = None, **kwargs: Any) -> Run:
        """Synchronous :meth:`aask` (works in plain scripts and inside Jupyter).

        >>> import tempfile
        >>> lab = Lab.from_config(workspace=tempfile.mkdtemp())  # the offline models
        >>> _ = lab.ingest_documents([{"id": "bw-1874", "text": "Mara Quill built the lighthouse in 1874."}], kb="demo")
        >>> run = lab.ask("Who built the lighthouse?", kb="demo")
        >>> [r.knowledge_id for r in run.references], "Mara Quill" in run.answer, run.error
        (['bw-1874'], True, '')
        >>> run.stages[:4]
        ['load_history', 'memory_recall', 'query_understand', 'chunk_search_parallel']
        """
        return _run_sync(lambda: self.aask(question, kb, **kwargs))

    async def _remember_turn(
        self, chat: ChatManage, outcome: QAOutcome, saved: Callable[[], None] | None = None
    ) -> None:
        """The assistant message with the answer so far (partial when the run was stopped),
        completed as §9.1 says: references, memories, cited documents, explicit facts.

        The message is written once the run is over, so a finished (or stopped) turn is stored
        completed in one write, then §9.1 step 2 runs; a turn that failed stays incomplete."""
        from rag_lab.session.completion import start_after_completion

        store = self.services.messages
        if store is None:
            return
        sid = chat.request.session_id
        finished = outcome.completed or outcome.cancelled
        completion: dict[str, Any] = (
            {"knowledge_references": chat.state.merge_result, "is_fallback": outcome.is_fallback} if finished else {}
        )
        message_id = store.insert_message(
            sid,
            "assistant",
            outcome.answer,
            chat.context.message_id,
            is_completed=finished,
            used_memories=list(chat.state.used_memories),
            **completion,
        )
        if saved is not None:  # the turn is stored: its ``complete`` may go out now
            saved()
        if finished:
            await start_after_completion(
                sid,
                message_id,
                content=outcome.answer,
                knowledge_references=chat.state.merge_result,
                query="" if outcome.cancelled else chat.request.query,
                user_id=chat.request.user_id,
                memory=self.services.memory,
            )


def _searched(chat: ChatManage, outcome: QAOutcome) -> list[Any]:
    """The search stage's output when the run stopped after it (retrieval only), else nothing."""
    if outcome.events and outcome.events[-1] == EventType.CHUNK_SEARCH_PARALLEL:
        return list(chat.state.search_result)
    return []


#: ``ingest: {prepare: …}``: put into the vector cache at ingest the texts the re-scorer and the
#: extractive answerer will embed — ``auto`` when either of them is the lab's (they embed with its
#: embedder), ``all`` always, ``none`` never (an HTTP reranker and a real chat model embed nothing)
PREPARE_CHOICES = ("auto", "all", "none")


def prepare_texts_for(section: Any, models: Mapping[str, Any], source: str) -> bool:
    """Whether ingest prepares the re-scorer's and answerer's texts under ``ingest: {prepare: …}``."""
    cfg = section or {}
    if not isinstance(cfg, Mapping) or set(cfg) - {"prepare"}:
        raise LabConfigError(f"{source}: ingest: expected {{prepare: auto|all|none}}, got {section!r}")
    choice = cfg.get("prepare", "auto")
    if choice not in PREPARE_CHOICES:
        raise LabConfigError(f"{source}: ingest.prepare = {choice!r}: use auto, all or none")
    if choice != "auto":
        return bool(choice == "all")
    reranker = models.get("reranker", {})  # null: no reranker at all
    rerank_embeds = isinstance(reranker, Mapping) and reranker.get("type", "embedding-rescorer") == "embedding-rescorer"
    chat = models.get("chat") or {"type": "extractive"}
    return bool(rerank_embeds or (isinstance(chat, Mapping) and chat.get("type", "extractive") == "extractive"))
