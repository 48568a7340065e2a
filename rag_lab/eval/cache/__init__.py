"""Content-addressed stage cache: search results, rerank-model scores and query embeddings on disk.

A sweep over post-retrieval params (rerank threshold, MMR λ, composite weights, top-K, merge
overlap, …) asks the same questions again and again; only the stages after retrieval see other
inputs. :func:`enable_stage_cache` wraps three services of a :class:`~rag_lab.lab.lab.Lab` without
touching any pipeline plugin:

* ``lab.services.searcher`` → :class:`CachingSearcher`, keyed by the primary KB, every
  :class:`~rag_lab.retrieval.base.SearchParams` field (the query embedding by the SHA-256 of its
  float32 bytes), the :class:`~rag_lab.types.params.PipelineParams` fields and the KB settings
  the chunk-search stage's contract declares (:func:`search_param_fields`,
  :func:`search_kb_fields`; a test keeps the contract true), each searched KB's BM25 settings
  (tokenizer identity, k1, b, method, dtype), engine, image embedder and content version
  (:class:`KbVersioner`), and the search code version;
* each rerank model → :class:`CachingReranker`, keyed by model id, query and the SHA-256 of every
  passage, in order;
* ``lab.services.embedder_for`` → embedders wrapped in :class:`CachingEmbedder` (query
  embeddings), keyed by the embedding model key and the text.

Every key also holds ``rag_lab.__version__`` and the hash of the sources of the stage's import
closure inside rag_lab (:func:`code_version_for`: the modules of the searcher, workspace and engine
router, or of the wrapped model, and every module they import, lazily or not), so editing any
module a cached stage runs invalidates its entries.

On disk: ``<root>/stages.sqlite``, in the storage layer the vector cache also uses
(:mod:`rag_lab.blobstore`: SQLite with WAL, queued writers across processes, bounded in bytes with
the least recently used entries evicted first). A row's key is the SHA-256 of the entry format, the
stage and the canonical JSON of the key; its value is the payload as JSON (no pickle), and the
last writer of a key wins. A row that does not parse counts as a miss (and as an ``error``) and is
rewritten; so is a read or write the file refuses. Hit / miss / write / error counters are kept
per stage.

The BM25 index cache (:class:`Bm25IndexCache`) keeps built keyword indexes keyed by tokenizer
identity, k1, b, method, dtype and the hash of the indexed texts, so a sweep over BM25 settings
builds each index once.

The package is split by responsibility: :mod:`.keys` (canonical JSON, digests, code and KB content
versions), :mod:`.store` (the on-disk store and counters), :mod:`.wrappers` (the caching services
and the BM25 index cache), :mod:`.enable` (installing them on a lab).
"""

from __future__ import annotations

from rag_lab.eval.cache import keys
from rag_lab.eval.cache.enable import StageCacheHandle, enable_stage_cache
from rag_lab.eval.cache.keys import *  # noqa: F403  (the names of keys.__all__)
from rag_lab.eval.cache.store import CacheStats, StageCache
from rag_lab.eval.cache.wrappers import (
    Bm25IndexCache,
    CachingEmbedder,
    CachingReranker,
    CachingSearcher,
    use_bm25_settings,
)

__all__ = [
    *keys.__all__,
    "use_bm25_settings",
    "Bm25IndexCache",
    "CacheStats",
    "CachingEmbedder",
    "CachingReranker",
    "CachingSearcher",
    "StageCache",
    "StageCacheHandle",
    "enable_stage_cache",
]
