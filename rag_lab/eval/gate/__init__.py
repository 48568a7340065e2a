"""Regression gate: compare a current evaluation with a committed baseline, metric by metric and
question by question.

**Metric checks.** For each suite (dataset slice) and gated metric, the queries present in both
reports are paired and ``d_q = current_q - baseline_q`` computed (samples NaN on either side are
left out of the pair and counted). A metric **regresses** when both hold:

* the mean difference is below ``-tolerance`` (default 0.02, absolute; per-metric overrides), and
* a one-sided paired test over queries says the drop is unlikely to be chance: ``p < alpha``
  (default 0.05). The test is a sign-flip permutation test of the mean difference (exact over
  all 2^n sign vectors up to n = 16, else ``n_resamples`` random flips from ``seed``), or a
  paired bootstrap of the mean difference. Both are deterministic for a fixed seed.

Each check also carries the percentile bootstrap confidence interval of the mean difference
(``ci_level``, default 95 %), the effect size (Cohen's d_z: mean difference / SD of the
differences) and what the slice can detect: ``min_queries`` (the fewest questions that must all
get worse, the others unchanged, for the test to reach ``p < alpha``) and ``mde`` (minimum
detectable effect: the mean drop a paired test at ``alpha`` detects with 80 % power when the
per-question changes are as variable as the metric is across the baseline's questions,
``(z_{1-alpha} + z_{0.8}) * SD_baseline / sqrt(n)``, and never below the tolerance).

It **fails** as well, whatever the difference, when the current mean is NaN, when the current run
has more NaN / failed samples than the baseline had (NaN is a failure, never averaged away), when
a suite has more pipeline / model errors than in the baseline, or when a gated suite, metric or
query of the baseline is missing from the current run. A metric that rose by more than the
tolerance with ``p < alpha`` is reported ``improved`` (passes; refresh the baseline to lock it in).

**Gated metrics** (unless ``GatePolicy.metrics`` names them): those of
:data:`DEFAULT_GATE_METRICS` present in the baseline, one name per quantity (``id_context_recall``
and ``nonllm_context_recall`` equal ``recall@10`` on these pipelines and are reported, not gated),
and only where the baseline mean lies inside ``headroom`` (default (0.05, 0.95)): a metric at
the floor cannot fail and one at the ceiling can never show an improvement, so they are listed
under ``not_gated`` with the reason instead (their per-question changes are still listed).

**Per-question changes.** The baseline stores each question's ranked document ids, final context
chunk ids and answer. Every question whose ranking, contexts or answer differ (or whose metric
values do) is listed, worst first (by its largest drop on a gated metric, then the sum of drops).
The offline pipeline is deterministic, so any such change is a real behaviour change: ``fail_on_change=True``
(``--fail-on-change``) fails the gate on any of them, for deterministic setups; the statistical
test above is the policy for noisy ones (an LLM in the loop).

:func:`run_gate` re-runs the baseline's own spec (suites, ks, ragas metrics, params) with the
offline defaults in a fresh workspace, unless a current report is given. Exit codes of the CLI:
0 pass, 1 regression / NaN / missing / errors / changes under ``--fail-on-change``, 2 unusable
input. :meth:`GateResult.to_json` (``gate.json``) holds the verdict for other tools.

The package is split by responsibility: :mod:`.stats` (the paired tests, confidence interval,
effect size and what a slice can detect), :mod:`.result` (policy, checks, per-question changes and
the verdict), :mod:`.render` (the table, Markdown, HTML and JUnit views of a result),
:mod:`.compare` (baseline vs current, suite by suite) and :mod:`.run` (re-running a baseline's spec
and :func:`run_gate`).
"""

from __future__ import annotations

from rag_lab.eval.gate.compare import changed_params, compare_reports, query_changes
from rag_lab.eval.gate.result import (
    DEFAULT_GATE_METRICS,
    ERRORS_METRIC,
    METRIC_FAMILIES,
    GateError,
    GatePolicy,
    GateResult,
    MetricCheck,
    QueryChange,
)
from rag_lab.eval.gate.run import baseline_spec, evaluate_spec, parse_metric_tolerances, run_gate
from rag_lab.eval.gate.stats import (
    EXACT_PERMUTATION_MAX_N,
    bootstrap_ci,
    detectable_effect,
    effect_size,
    min_queries_to_detect,
    paired_bootstrap_pvalue,
    paired_permutation_pvalue,
)

__all__ = [
    "DEFAULT_GATE_METRICS",
    "METRIC_FAMILIES",
    "GateError",
    "GatePolicy",
    "GateResult",
    "MetricCheck",
    "QueryChange",
    "bootstrap_ci",
    "changed_params",
    "compare_reports",
    "detectable_effect",
    "min_queries_to_detect",
    "paired_bootstrap_pvalue",
    "paired_permutation_pvalue",
    "query_changes",
    "run_gate",
    # used by the CLI and the tests
    "ERRORS_METRIC",
    "EXACT_PERMUTATION_MAX_N",
    "baseline_spec",
    "effect_size",
    "evaluate_spec",
    "parse_metric_tolerances",
]
