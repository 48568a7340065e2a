"""The fast evaluator against the full pipeline on bundled datasets: for every config of a grid
over post-retrieval params, every question's final contexts (ids, documents, texts, scores) are
the pipeline's. Plus the sweep's fast path: identical rows, loud failure on a difference, a new
capture per retrieval config."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from rag_lab.eval.runner import SuiteSpec, ingest_dataset
from rag_lab.tuning import FastEvaluator, compare_references
from rag_lab.tuning.capture import CaptureQuestion, acapture_questions

pytestmark = pytest.mark.slow

#: 10 configs: thresholds (with the fallback ladder), λ, top-K, composite weights, FAQ boost,
#: merge overlap and expansion settings
GRID: list[dict[str, Any]] = [
    {},
    {"rerank_threshold": 0.9},  # nothing passes: top-1 fallback / degraded retry
    {"rerank_threshold": 0.2, "mmr_lambda": 0.3, "rerank_top_k": 3},
    {"rerank_threshold": 0.5, "mmr_lambda": 1.0, "rerank_top_k": 10},
    {"mmr_lambda": 0.0, "rerank_top_k": 5},
    {"composite_model_weight": 0.2, "composite_base_weight": 0.7, "composite_source_weight": 0.1},
    {"overlap_threshold": 0.3, "rerank_top_k": 8},
    {"expansion_min_len": 2000, "expansion_max_len": 3000, "rerank_top_k": 4},
    {"faq_priority_enabled": True, "faq_score_boost": 2.0, "rerank_fallback_min_score": 0.9, "rerank_threshold": 0.95},
    {"join_min_overlap": 40, "join_span": 60, "rerank_top_k": 1, "temperature": 0.9},
]


def _ask(lab: Any, question: str, kb: str, params: dict[str, Any]) -> Any:
    return asyncio.run(lab.aask(question, kb=kb, params=params, snapshots=False))


@pytest.fixture(scope="module")
def cmrc_lab(tmp_path_factory):
    from rag_lab.lab.lab import Lab

    spec = SuiteSpec("cmrc2018", 6, 18)
    ds = spec.load()
    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("cmrc_ws"))
    ingest_dataset(lab, ds, spec.kb_name)
    yield lab, ds, spec.kb_name
    lab.workspace.close()


def _check_grid(lab: Any, ds: Any, kb: str) -> dict[str, int]:
    questions = [CaptureQuestion(q.id, q.question) for q in ds.queries]
    inputs = asyncio.run(acapture_questions(lab, questions, kb))
    fe = FastEvaluator(inputs, lab.params)
    for q in inputs:  # the capture run's own contexts are the base config's
        assert compare_references(q.references, fe.references(q, fe.params_for({}))[1]) == ""
    for config in GRID:
        fast = fe.evaluate(config)
        for q in ds.queries:
            run = _ask(lab, q.question, kb, config)
            diff = compare_references(run.references, fast[q.id])
            assert diff == "", f"config {config}, question {q.id}: {diff}"
    return fe.stats.outcomes


def test_fast_evaluator_equals_the_pipeline_on_hotpotqa(eval_lab: Any, small_ds: Any, small_spec: Any) -> None:
    outcomes = _check_grid(eval_lab, small_ds, small_spec.kb_name)
    # the grid reaches the ladder's fallback, not only the plain threshold
    assert outcomes.get("ok", 0) > 0 and outcomes.get("fallback_top1", 0) + outcomes.get("threshold_degraded", 0) > 0


def test_fast_evaluator_equals_the_pipeline_on_cmrc2018(cmrc_lab: Any) -> None:
    lab, ds, kb = cmrc_lab  # Chinese: jieba token sets for MMR and overlap removal
    outcomes = _check_grid(lab, ds, kb)
    assert sum(outcomes.values()) == len(GRID) * len(ds.queries)


def test_params_outside_post_retrieval_are_refused(eval_lab: Any) -> None:
    fe = FastEvaluator([], eval_lab.params)
    with pytest.raises(ValueError, match="embedding_top_k change the captured stage inputs"):
        fe.params_for({"embedding_top_k": 5, "mmr_lambda": 0.5})
    assert fe.params_for({"mmr_lambda": 0.5}).mmr_lambda == 0.5
    assert fe.params_for({"mmr_lambda": 0.5}) is fe.params_for({"mmr_lambda": 0.5})  # validated once


def test_sweep_fast_path_matches_the_pipeline_rows(eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path) -> None:
    from rag_lab.eval.sweep import parse_param, run_grid

    spaces = [
        parse_param("rerank_threshold=0.2,0.6"),
        parse_param("mmr_lambda=0.4,0.9"),
        parse_param("embedding_top_k=5,30"),
    ]
    suites = [(small_ds, small_spec.kb_name)]
    kw = dict(objective="ndcg@10", cache_dir=tmp_path / "cache", progress=False, ragas_metrics=["id_context_recall"])
    fast = asyncio.run(run_grid(eval_lab, suites, spaces, check=3, **kw))
    slow = asyncio.run(run_grid(eval_lab, suites, spaces, fast=False, **kw))
    metrics = ["ndcg@10", "recall@5", "mrr", "map", "id_context_recall"]
    assert [[r[m] for m in metrics] for r in fast.rows] == [[r[m] for m in metrics] for r in slow.rows]
    assert fast.cache_stats["fast_path"]["captures"] == 2  # one per embedding_top_k value
    best3 = sorted(sorted(range(8), key=lambda i: (-slow.rows[i]["ndcg@10"], i))[:3])
    assert fast.cache_stats["fast_path"]["checked_configs"] == best3  # the 3 best by the objective
    assert fast.cache_stats["fast_path"]["check_plan"] == "the 3 best of 8 configs"
    assert [r["evaluated_by"] for r in fast.rows] == ["fast, checked" if i in best3 else "fast" for i in range(8)]
    assert "evaluated_by" not in slow.rows[0]


def test_sweep_fails_loudly_when_the_fast_path_differs(
    eval_lab: Any, small_ds: Any, small_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted difference (the fast path drops every question's last context): ``check=0`` runs
    nothing on the pipeline and does not see it; ``check=1`` re-runs the best config and fails."""
    from rag_lab.eval.sweep import SweepError, parse_param, run_grid, runners
    from rag_lab.tuning import evaluator

    real = evaluator.FastEvaluator.references

    def drop_last(self: Any, q: Any, p: Any) -> Any:
        outcome, refs = real(self, q, p)
        return outcome, refs[:-1]

    pipeline_runs: list[dict[str, Any]] = []
    real_pipeline = runners._Evaluator.pipeline_results

    async def counted(self: Any, config: Any) -> Any:
        pipeline_runs.append(dict(config))
        return await real_pipeline(self, config)

    monkeypatch.setattr(evaluator.FastEvaluator, "references", drop_last)
    monkeypatch.setattr(runners._Evaluator, "pipeline_results", counted)

    def sweep(check: int) -> Any:
        suites = [(small_ds, small_spec.kb_name)]
        spaces = [parse_param("mmr_lambda=0.5,0.7")]
        return asyncio.run(run_grid(eval_lab, suites, spaces, "mrr", cache_dir=None, progress=False, check=check))

    unchecked = sweep(0)
    assert pipeline_runs == [] and [r["evaluated_by"] for r in unchecked.rows] == ["fast", "fast"]
    assert unchecked.cache_stats["fast_path"]["checked_configs"] == []
    assert unchecked.cache_stats["fast_path"]["check_plan"] == "none (--check 0)"
    best = min(range(2), key=lambda i: (-unchecked.rows[i]["mrr"], i))
    with pytest.raises(
        SweepError, match="fast evaluator and pipeline disagree on 1 of 1 checked configs .*\n  config .*question"
    ):
        sweep(1)
    assert pipeline_runs == [{"mmr_lambda": unchecked.rows[best]["mmr_lambda"]}]


def test_param_sets_follow_the_stage_contracts() -> None:
    from rag_lab.pipeline.contracts import contract_of
    from rag_lab.pipeline.plugins.merge import PluginMerge
    from rag_lab.tuning import params as P

    assert {"rerank_threshold", "mmr_lambda", "rerank_top_k", "composite_model_weight", "overlap_threshold"} <= (
        P.POST_RETRIEVAL_PARAMS
    )
    assert {"embedding_top_k", "vector_threshold", "rrf_k", "enable_rewrite"} <= P.RETRIEVAL_PARAMS
    assert not (P.RETRIEVAL_PARAMS & P.POST_RETRIEVAL_PARAMS) and not (P.ANSWER_PARAMS & P.POST_RETRIEVAL_PARAMS)
    assert {"temperature", "citation_enabled"} <= P.ANSWER_PARAMS
    # merge's own params, and rerank_top_k through request.rerank_top_k (its input's cut)
    assert P.MERGE_PARAMS == frozenset(contract_of(PluginMerge).params) | {"rerank_top_k"}
    assert not P.CAPTURE_PARAMS & P.POST_RETRIEVAL_PARAMS and "data_analysis_enabled" not in P.ANSWER_PARAMS
    post, other = P.split_config({"mmr_lambda": 0.5, "temperature": 0.1, "embedding_top_k": 5, "bm25_k1": 1.2})
    assert post == {"mmr_lambda": 0.5, "temperature": 0.1} and other == {"embedding_top_k": 5, "bm25_k1": 1.2}


def test_answer_metrics_use_the_full_pipeline() -> None:
    from rag_lab.eval.sweep.fast import fast_path_reason

    assert fast_path_reason("ndcg@10", ["id_context_recall"]) == ""
    assert "chrf read the answer" in fast_path_reason("chrf", [])
    assert "measured on the pipeline" in fast_path_reason("latency_ms", [])
    assert list(itertools.islice(GRID, 1)) == [{}]
