"""The state of a :class:`~rag_lab.retrieval.hybrid_search.HybridSearcher`: the workspace, the
embedder and engine of each KB, the params, the query vectors it embedded and the rows hydration
reads; and the fan-out of one search's store groups, whose engine scores it normalises.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Self

import numpy as np

from rag_lab.retrieval.base import RetrieveEngine, RetrieveResult
from rag_lab.retrieval.fusion import normalize_engine_scores
from rag_lab.retrieval.hydration import HydrationMemo
from rag_lab.retrieval.image_recall import ImageEmbedder
from rag_lab.retrieval.store_groups import StoreGroup, fan_out
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder

EngineFor = Callable[["KnowledgeBase"], tuple[str, RetrieveEngine]]


#: query vectors kept per searcher (least recently used dropped first)
QUERY_VECTOR_CACHE = 1024


class HybridSearcherBase:
    """A searcher's state, shared by the steps of the search (one mixin each)."""

    def __init__(
        self,
        workspace: Workspace,
        embedder_for: Callable[[KnowledgeBase], Embedder | None],
        params: PipelineParams | None = None,
        engine_for: EngineFor | None = None,
        image_embedder_for: Callable[[KnowledgeBase], ImageEmbedder | None] | None = None,
    ) -> None:
        self.workspace = workspace
        self.image_embedder_for = image_embedder_for
        self.embedder_for = embedder_for
        self.params = params or PipelineParams()
        if engine_for is None:
            engine = workspace.engine()

            def engine_for(kb: KnowledgeBase) -> tuple[str, RetrieveEngine]:
                return "", engine

        self.engine_for: EngineFor = engine_for
        #: query vectors by (embedding model, query text): a repeated question is embedded once
        self._query_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        #: the rows hydration reads, per store state (shared by the with_params copies)
        self._rows = HydrationMemo()

    def with_params(self, params: PipelineParams) -> Self:
        """The same searcher reading another request's params (shares workspace and engines)."""
        if params is self.params:
            return self
        other = copy.copy(self)
        other.params = params
        return other

    async def _retrieve(self, groups: Sequence[StoreGroup]) -> list[RetrieveResult]:
        results = await fan_out(groups, self.params.store_fanout_concurrency, self.params.store_fanout_timeout_s)
        return normalize_engine_scores(results)
