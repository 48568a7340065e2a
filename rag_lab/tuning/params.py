"""Which parameters the fast evaluator replays from captured inputs, and which invalidate them —
derived from the stages' declared contracts (:mod:`rag_lab.pipeline.contracts`), never kept by hand.

A stage reads a param directly (its contract's ``params``) or through a request field that
defaults from it (``request.rerank_threshold`` ← ``rerank_threshold``). With the stages grouped as

* retrieval: everything up to the search (history, memory recall, query understanding, entities,
  search), whose output the capture keeps;
* post-retrieval: CHUNK_RERANK (rerank, wiki boost, memory affinity), CHUNK_MERGE, FILTER_TOP_K,
  which the evaluator replays;
* answer: the stages after them (context assembly, the chat model), which never change the contexts;

the sets are:

* :data:`POST_RETRIEVAL_PARAMS`: read by a post-retrieval stage and by no retrieval stage, minus
  :data:`CAPTURE_PARAMS` (read by the rerank stage *before* its model call: which candidates go to
  the model and how long it may take — the capture keeps the model's answer for those);
* :data:`ANSWER_PARAMS`: read only by answer stages (or by no stage at all);
* everything else invalidates the captured inputs: such a config is captured again (one pipeline
  run per question for each distinct retrieval config) and then evaluated.

One exception is kept per question rather than per config: the search reads ``rerank_top_k`` only
to size query expansion (:data:`EXPANSION_PARAMS`); it is replayed, and the questions whose search
expanded are recaptured when it changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rag_lab.pipeline.contracts import contract_of
from rag_lab.pipeline.plugins.chat_completion import PluginChatCompletion
from rag_lab.pipeline.plugins.chat_completion_stream import PluginChatCompletionStream
from rag_lab.pipeline.plugins.extract_entity import PluginExtractEntity
from rag_lab.pipeline.plugins.filter_top_k import PluginFilterTopK
from rag_lab.pipeline.plugins.into_chat_message import PluginIntoChatMessage
from rag_lab.pipeline.plugins.load_history import PluginLoadHistory
from rag_lab.pipeline.plugins.memory_affinity import PluginMemoryAffinity
from rag_lab.pipeline.plugins.memory_recall import PluginMemoryRecall
from rag_lab.pipeline.plugins.merge import PluginMerge
from rag_lab.pipeline.plugins.query_understand import PluginQueryUnderstand
from rag_lab.pipeline.plugins.rerank import PluginRerank
from rag_lab.pipeline.plugins.search import PluginSearch
from rag_lab.pipeline.plugins.search_entity import PluginSearchEntity
from rag_lab.pipeline.plugins.search_parallel import PluginSearchParallel
from rag_lab.pipeline.plugins.wiki_boost import PluginWikiBoost
from rag_lab.types.chat_manage import _request_defaults
from rag_lab.types.params import PipelineParams

__all__ = [
    "ANSWER_PARAMS",
    "CAPTURE_PARAMS",
    "EXPANSION_PARAMS",
    "MERGE_PARAMS",
    "POST_RETRIEVAL_PARAMS",
    "RETRIEVAL_PARAMS",
    "UNSUPPORTED_SWITCHES",
    "params_read",
    "split_config",
]

RETRIEVAL_STAGES = (
    PluginLoadHistory,
    PluginMemoryRecall,
    PluginQueryUnderstand,
    PluginExtractEntity,
    PluginSearch,
    PluginSearchEntity,
    PluginSearchParallel,
)
RERANK_STAGES = (PluginRerank, PluginWikiBoost, PluginMemoryAffinity)
POST_RETRIEVAL_STAGES = (*RERANK_STAGES, PluginMerge, PluginFilterTopK)
ANSWER_STAGES = (PluginIntoChatMessage, PluginChatCompletion, PluginChatCompletionStream)

#: request fields that default from a param of the same name
_REQUEST_PARAM_FIELDS = frozenset(_request_defaults(PipelineParams()))


def params_read(stages: Iterable[type]) -> frozenset[str]:
    """Params the stages declare, directly or through request fields defaulting from a param."""
    out: set[str] = set()
    for stage in stages:
        c = contract_of(stage)
        out.update(c.params)
        for path in c.reads:
            section, _, name = path.partition(".")
            if section == "request" and name in _REQUEST_PARAM_FIELDS:
                out.add(name)
    return frozenset(out)


#: read by the rerank stage before its model call (candidate selection, the call's timeout)
CAPTURE_PARAMS = frozenset({"rerank_max_candidates", "rerank_timeout_s", "image_ocr_text_min_chars"})
#: read by the search only to size query expansion; replayed, expanded questions recaptured
EXPANSION_PARAMS = frozenset({"rerank_top_k"})
RETRIEVAL_PARAMS = params_read(RETRIEVAL_STAGES) - EXPANSION_PARAMS
POST_RETRIEVAL_PARAMS = params_read(POST_RETRIEVAL_STAGES) - RETRIEVAL_PARAMS - CAPTURE_PARAMS
MERGE_PARAMS = params_read((PluginMerge,)) - RETRIEVAL_PARAMS
#: switches the pipeline builder reads to add stages between retrieval and the answer (web fetch,
#: data analysis change the contexts; the evaluator does not replay them)
UNSUPPORTED_SWITCHES = ("web_search_enabled", "web_fetch_enabled", "data_analysis_enabled")
ANSWER_PARAMS = (
    frozenset(PipelineParams.model_fields)
    - RETRIEVAL_PARAMS
    - params_read(POST_RETRIEVAL_STAGES)
    - CAPTURE_PARAMS
    - frozenset(UNSUPPORTED_SWITCHES)
)


def split_config(config: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """``(post-retrieval or answer overrides, overrides that invalidate the captured inputs)``."""
    post = {
        k: v
        for k, v in config.items()
        if (k in POST_RETRIEVAL_PARAMS or k in ANSWER_PARAMS) and k not in UNSUPPORTED_SWITCHES
    }
    other = {k: v for k, v in config.items() if k not in post}
    return post, other
