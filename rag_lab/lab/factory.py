"""Building a lab from its config: :func:`wire_lab` builds the models, the workspace, the engines,
the session and memory stores, the pipeline's services and the stream manager, and sets them on
the lab (the attributes :class:`~rag_lab.lab.parts.LabParts` declares).

The hooks it installs (the workspace's re-embedder, the searcher's embedder and image embedder)
read the lab's attributes when they are called, so replacing ``lab.image_embedder`` or the
models afterwards reaches them. Every config error is a
:class:`~rag_lab.lab.config.LabConfigError` naming the file and the section.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.lab.config import (
    CHAT_MODEL_ID,
    RERANK_MODEL_ID,
    LabConfigError,
    check_top_keys,
    embedder_plan,
    prepare_texts_for,
    vector_cache_from_config,
)
from rag_lab.pipeline.container import Services
from rag_lab.prompts.templates import PromptTemplates
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab
    from rag_lab.models.embedding import CachedEmbedder


def wire_lab(lab: Lab, config: Mapping[str, Any] | None, source: str, workspace: str | Path | None) -> None:
    """Build every part of ``lab`` from ``config`` (``source`` names it in errors); ``workspace``
    overrides the config's ``workspace`` (default ``.rag_lab``)."""
    cfg = dict(config or {})
    check_top_keys(cfg, source)
    lab.config = cfg
    lab.params = PipelineParams.from_mapping(cfg.get("params") or {}, source=f"{source}: params")
    lab.language = str(cfg.get("language") or "English")
    root = Path(workspace if workspace is not None else cfg.get("workspace") or ".rag_lab")
    from rag_lab.knowledge.store_config import StoreConfig

    try:
        lab.store_config = StoreConfig.from_config(cfg.get("store"), source)
    except ValueError as exc:
        raise LabConfigError(str(exc)) from None
    models = dict(cfg.get("models") or {})
    lab.vector_cache = vector_cache_from_config(cfg.get("vector_cache", True), root, source)
    cached = _wire_models(lab, models, source)
    lab.prepare_texts = prepare_texts_for(cfg.get("ingest"), models, source)
    from rag_lab.pipeline.knobs import check_score_range

    try:
        check_score_range(lab.params, lab.rerank_score_range, lab._reranker_name())
    except ValueError as exc:
        raise LabConfigError(f"{source}: params: {exc}") from None
    _wire_observability(lab, cfg, source)
    _wire_prompts(lab, cfg, source)
    _wire_workspace(lab, cfg, root, source)
    lab.image_embedder = None
    _wire_stores(lab, cfg, cached)
    lab.services = _services(lab, cfg, source)
    lab._manager = None
    lab._snapshot_plan = None
    from rag_lab.stream.factory import build_stream_manager

    try:
        lab.stream_manager = build_stream_manager(cfg.get("stream_manager"))
    except ValueError as exc:
        raise LabConfigError(f"{source}: stream_manager: {exc}") from None


def _wire_models(lab: Lab, models: Mapping[str, Any], source: str) -> CachedEmbedder:
    """The embedder, reranker (none when ``models.reranker`` is null) and chat model; returns the
    cached embedder they share."""
    from rag_lab.models.embedding import CachedEmbedder
    from rag_lab.models.registry import build_chat_model, build_embedder, build_reranker
    from rag_lab.observability.ledger import LedgerChatModel, LedgerEmbedder, LedgerReranker

    lab.embedder_plan = embedder_plan(models, source)
    lab._multilingual = None  # built on first use (lab.multilingual_embedder())
    try:
        # one cached embedder per lab: ingest, the query, the re-scorer and the answerer share
        # its memory and the workspace's vector cache, so a text is embedded once per model
        cached = CachedEmbedder(build_embedder(lab.embedder_plan.main), store=lab.vector_cache)
        # every model is wrapped so each run's ledger counts its calls, tokens and cost
        lab.embedder = LedgerEmbedder(cached)
        lab.reranker = (
            LedgerReranker(build_reranker(models.get("reranker") or {"type": "embedding-rescorer"}, embedder=cached))
            if models.get("reranker", True) is not None
            else None
        )
        lab.chat_model = LedgerChatModel(
            build_chat_model(models.get("chat") or {"type": "extractive"}, embedder=cached)
        )
    except ValueError as exc:
        raise LabConfigError(f"{source}: models: {exc}") from None
    return cached


def _wire_observability(lab: Lab, cfg: Mapping[str, Any], source: str) -> None:
    """The price table, the tracer and the ledger of calls made outside a run."""
    from rag_lab.observability.ledger import Ledger, PriceTable
    from rag_lab.observability.tracing import build_tracer

    try:
        lab.prices = PriceTable(cfg.get("prices") or {})
        lab.tracer = build_tracer(cfg.get("tracing"))
        lab.background_ledger = Ledger(lab.prices)
    except ValueError as exc:
        raise LabConfigError(f"{source}: {exc}") from None


def _wire_prompts(lab: Lab, cfg: Mapping[str, Any], source: str) -> None:
    """The prompt templates and the id of each one the lab uses, every id checked to exist."""
    lab.prompts = PromptTemplates()
    pcfg = dict(cfg.get("prompts") or {})
    lab.prompt_ids = {
        "system_prompt": pcfg.get("system_prompt", "default_kb"),
        "context_template": pcfg.get("context_template", "default_context"),
        "rewrite": pcfg.get("rewrite", "default_rewrite"),
        "fallback_prompt": pcfg.get("fallback_prompt", "default_fallback_prompt"),
    }
    for key, tid in lab.prompt_ids.items():
        try:
            lab.prompts.get(tid)
        except ValueError as exc:
            raise LabConfigError(f"{source}: prompts.{key}: {exc}") from None


def _wire_workspace(lab: Lab, cfg: Mapping[str, Any], root: Path, source: str) -> None:
    """The workspace at ``root`` and the engine router; the workspace re-embeds with the lab's
    embedder and mirrors KBs to the engines that hold copies."""
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.engines import EngineConfigError, EngineRouter

    lab.workspace = Workspace(
        root, store=lab.store_config.knowledge_location(root), store_outage_s=lab.store_config.outage_s
    )
    # an index found disagreeing with the store re-embeds what it lacks with the model of its
    # space (the lab's, or its multilingual one)
    lab.workspace.embedder_for = lab._workspace_embedder
    try:
        lab.engines = EngineRouter(lab.workspace, cfg.get("engine"), cfg.get("knowledge_bases"), source=source)
    except EngineConfigError as exc:
        raise LabConfigError(str(exc)) from None
    lab.workspace.mirror_for = lab.engines.mirror_for


def _wire_stores(lab: Lab, cfg: Mapping[str, Any], cached: CachedEmbedder) -> None:
    """Sessions and messages persist next to the knowledge bases; long-term memory is opt-in
    (its affinity boost makes results depend on earlier questions)."""
    from rag_lab.memory import MemoryStore
    from rag_lab.session.sqlite_store import SQLiteSessionStore

    lab.sessions = SQLiteSessionStore(
        lab.store_config.sessions_location(lab.workspace.root), outage_s=lab.store_config.outage_s
    )
    mem_cfg = dict(cfg.get("memory") or {})
    lab.memory = MemoryStore(lab.workspace.root / "memory.sqlite", cached) if mem_cfg.get("enabled") else None


def _services(lab: Lab, cfg: Mapping[str, Any], source: str) -> Services:
    """The pipeline's services over the lab's parts, web search and fetching included."""
    from rag_lab.retrieval.hybrid_search import HybridSearcher
    from rag_lab.web import WebConfigError, web_services_from_config

    services = Services(
        workspace=lab.workspace,
        searcher=HybridSearcher(
            lab.workspace,
            lab._embedder_for,
            lab.params,
            engine_for=lab.engines.engine_for,
            image_embedder_for=lambda kb: lab.image_embedder,
        ),
        embedder_for=lab._embedder_for,
        chat_models={CHAT_MODEL_ID: lab.chat_model},
        rerank_models={RERANK_MODEL_ID: lab.reranker} if lab.reranker is not None else {},
        prompts=lab.prompts,
        messages=lab.sessions,
        memory=lab.memory,
        tracer=lab.tracer,
        graph=lab.workspace.graph,
    )
    try:
        services.web_search, services.web_fetcher = web_services_from_config(cfg.get("web"), source=f"{source}: web")
    except WebConfigError as exc:
        raise LabConfigError(str(exc)) from None
    return services
