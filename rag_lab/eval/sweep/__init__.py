"""Parameter sweeps: grid and optuna over PipelineParams fields within their declared ranges.

A sweep evaluates configs (dicts of overrides) on one or more dataset slices and ranks them by an
LLM-free objective: a retrieval metric (``ndcg@10``, ``recall@5``, ``mrr``, ``map``, …) or an
offline ragas metric (``id_context_recall``, ``chrf``, …); with several suites the objective is the
mean of the suite means. LLM-judge metrics are refused as objectives (run them on the best config).

The stage cache (:mod:`rag_lab.eval.cache`) is on by default, so a sweep over post-retrieval
params (rerank threshold, MMR λ, composite weights, top-K, merge overlap…) searches and reranks
each question once. Latency is recorded as run, i.e. with cache reads for the cached stages.

``bm25_k1``, ``bm25_b`` and ``bm25_method`` are accepted too: they are KB index settings, not
PipelineParams; each value set is served by a BM25 index built once in the cache.

Parameter specs (``--param``): ``name=lo:hi:step`` (inclusive grid; optuna samples the same
steps), ``name=lo:hi`` (continuous; optuna only), ``name=a,b,c`` (choices), ``name=v`` (fixed).

The package is split by responsibility: :mod:`.specs` (parameter specs, grid, objective),
:mod:`.runners` (evaluating configs, grid and optuna), :mod:`.outputs` (:class:`SweepResult`: rows,
best config, CSV, YAML and Markdown). The files a sweep writes, with its plots, are written by
:func:`rag_lab.lab.outputs.write_sweep_outputs`.
"""

from __future__ import annotations

from rag_lab.eval.sweep.outputs import SweepResult
from rag_lab.eval.sweep.runners import run_grid, run_optuna
from rag_lab.eval.sweep.specs import (
    INDEX_PARAMS,
    ParamSpace,
    SweepError,
    grid_configs,
    objective_direction,
    parse_param,
)

__all__ = [
    "INDEX_PARAMS",
    "ParamSpace",
    "SweepError",
    "SweepResult",
    "grid_configs",
    "objective_direction",
    "parse_param",
    "run_grid",
    "run_optuna",
]
