"""What a lab is made of: the attributes :func:`rag_lab.lab.factory.wire_lab` sets on a
:class:`~rag_lab.lab.lab.Lab`, declared once for the Lab and the mixins it is assembled from
(:mod:`rag_lab.lab.run_request`, :mod:`rag_lab.lab.knowledge`, :mod:`rag_lab.lab.turns`).

Each one is a plain attribute a notebook may read or replace (``lab.image_embedder = …``,
``lab.stream_manager = …``): the hooks the factory installs read them at call time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.cache.enable import StageCacheHandle
    from rag_lab.knowledge.store_config import StoreConfig
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.lab.config import EmbedderPlan
    from rag_lab.memory import MemoryStore
    from rag_lab.models.vector_cache import VectorCache
    from rag_lab.observability.ledger import Ledger, LedgerChatModel, LedgerEmbedder, LedgerReranker, PriceTable
    from rag_lab.observability.tracing import NullTracer, OtelTracer
    from rag_lab.pipeline.container import Services
    from rag_lab.pipeline.plugin import EventManager
    from rag_lab.pipeline.snapshots import SnapshotPlan
    from rag_lab.prompts.templates import PromptTemplates
    from rag_lab.retrieval.engines import EngineRouter
    from rag_lab.retrieval.image_recall import ImageEmbedder
    from rag_lab.session.sqlite_store import SQLiteSessionStore
    from rag_lab.stream.manager import StreamManager
    from rag_lab.types.params import PipelineParams


class LabParts:
    """The attributes of a lab (declarations only; the factory assigns them)."""

    #: the config as given (top-level keys checked)
    config: dict[str, Any]
    #: the lab's default params (``params`` section)
    params: PipelineParams
    language: str
    #: where KBs, documents, chunks, sessions and messages live (the ``store`` section)
    store_config: StoreConfig
    #: the workspace's persistent vector cache (``None``: ``vector_cache: false``)
    vector_cache: VectorCache | None
    #: the models, each wrapped so every run's ledger counts its calls, tokens and cost
    embedder: LedgerEmbedder
    #: ``models.embedder`` / ``models.multilingual_embedder`` as read (:mod:`rag_lab.lab.embedders`)
    embedder_plan: EmbedderPlan
    #: the multilingual embedder once built (``lab.multilingual_embedder()`` builds it)
    _multilingual: LedgerEmbedder | None
    reranker: LedgerReranker | None
    chat_model: LedgerChatModel
    #: whether ingest puts the re-scorer's and answerer's texts into the vector cache
    prepare_texts: bool
    prices: PriceTable
    tracer: NullTracer | OtelTracer
    #: model calls made outside a question's run (session titles started by the server)
    background_ledger: Ledger
    prompts: PromptTemplates
    #: the template id of each prompt the lab uses (``prompts`` section)
    prompt_ids: dict[str, str]
    workspace: Workspace
    #: which retrieval engine serves each KB (``engine`` / ``knowledge_bases`` in the config)
    engines: EngineRouter
    #: optional image-text embedder (an ``ImageEmbedder``: text and image towers in one space)
    #: for image recall; none ships offline, so it is set by the user (``lab.image_embedder = …``)
    image_embedder: ImageEmbedder | None
    sessions: SQLiteSessionStore
    #: long-term memory (``memory: {enabled: true}``), else ``None``
    memory: MemoryStore | None
    #: what the pipeline's plugins call (searcher, models, prompts, message store, memory, web)
    services: Services
    stream_manager: StreamManager
    #: the plugin chain and its snapshot plan, built on the first run
    _manager: EventManager | None
    _snapshot_plan: SnapshotPlan | None
    #: the stage cache :func:`~rag_lab.eval.cache.enable_stage_cache` installed (set by it, not the factory)
    _stage_cache_handle: StageCacheHandle | None
