"""Regression gate: compare a current evaluation with a committed baseline, metric by metric and
question by question, and give each check a verdict tier.

**Both reports are validated first** (:mod:`rag_lab.eval.report.schema`): values inside each
metric's declared range, numbers not strings, one row and one record per question, every declared
metric on every row. A damaged report is unusable input (exit 2) naming file, suite, question and
field; it never reaches a comparison.

**Metric checks.** For each suite and gated metric, the queries present in both reports are paired
and ``d_q = current_q - baseline_q`` computed (differences under 1e-9 are float noise, 0; repeated
judge scores enter as each question's mean, so their spread widens the interval; no question is
ever left out). When some question moved, :func:`~.stats.paired_test` gives the check three
one-sided p-values of the mean difference — a drop (``mean < 0``), a rise (``mean > 0``) and
non-inferiority (``mean > -tolerance``: the data rule out a drop of the tolerance) — from a
sign-flip permutation test (default) or a paired bootstrap (``scipy.stats``, deterministic for a
fixed seed), and the percentile bootstrap interval of the mean. Each family of p-values is
corrected across the gate's tested checks with **Holm's step-down correction**
(``correction="holm"``; raw and adjusted p are both reported). Each check then gets one status, in
this order:

* ``nan``: the current mean is NaN, or a question whose value was finite in the baseline is NaN /
  failed now (compared question by question: a NaN that moves to another question fails too);
* ``no_samples``: no question has a finite value in both reports (a judge that never answered in
  either run): reported once with the judge and a reason, never as a regression (passes);
* ``unchanged``: no question moved (passes);
* ``regression``: the mean dropped by more than the tolerance (default 0.02, per-metric
  overrides) and the drop is significant (adjusted ``p < alpha``, default 0.05);
* ``probable_regression``: the mean dropped by more than the tolerance but not significantly. It
  **fails**, and ``allow_underpowered`` never lets it pass: a slice too small to prove a large
  drop is no evidence that there is none;
* ``inconclusive``: the mean is within the tolerance but the non-inferiority test does not rule
  out a drop of the tolerance (adjusted ``p >= alpha``). It **fails** unless
  ``allow_underpowered``; the note says about how many questions with such changes would settle
  it (:func:`~.stats.questions_to_settle`);
* ``improved``: the mean rose by more than the tolerance with an adjusted rise ``p < alpha``
  (passes; refresh the baseline to lock it in);
* ``ok``: a drop of the tolerance is ruled out (passes).

Every default metric present in the baseline is gated, saturated ones included: a metric at its
ceiling can only fall, which is what a gate is for (it is marked ``saturated="ceiling"``), and one
at the floor can only rise. ``missing`` (a gated suite, metric or query of the baseline absent
from the current run) fails; so does the per-suite ``model_errors`` check when any question of
the baseline has a pipeline / model error it did not have (errors compared per question).

Each check also carries the percentile bootstrap confidence interval of the mean difference
(``ci_level``), the effect size (Cohen's d_z) and the counts of questions that moved, got worse
and got better. The verdict groups the checks in tiers: regression, probable regression,
inconclusive, improvement, pass.

**Per-question changes.** Every question whose error, ranking, final contexts, answer or gated
metric values differ (a metric turned NaN included) is listed, new failures first, then worst first
(largest drop on a gated metric). The offline pipeline is deterministic, so any such change is a
real behaviour change: ``fail_on_change=True`` (``--fail-on-change``) fails the gate on any of them,
the policy for deterministic setups (``make test`` uses it); the statistical test is the policy for
noisy ones (an LLM in the loop).

**Provenance.** The gate warns (never fails) when the baseline is older than ``max_age_days`` or
was made by another code version, other models or other dataset content
(:mod:`.provenance`).

:func:`run_gate` re-runs the baseline's own spec (suites, ks, ragas metrics, params) in a fresh
workspace, with a lab from the caller's ``lab_factory`` (the command line's: ``Lab.from_config``
with ``--config``, the offline defaults when none is given), unless a current report is given. Exit codes of the CLI:
0 pass, 1 regression / probable regression / NaN / missing / errors / inconclusive / changes
under ``--fail-on-change``, 2 unusable input. :meth:`GateResult.to_json` (``gate.json``) holds the
verdict for other tools; :meth:`GateResult.summary_markdown` a short summary for CI pages.

The package is split by responsibility: :mod:`.stats` (the paired tests, Holm, confidence
interval, effect size and the questions that would settle a check), :mod:`.result` (policy, checks, per-question
changes and the verdict), :mod:`.render` (the table, Markdown, summary, HTML and JUnit views of a
result), :mod:`.compare` (baseline vs current, suite by suite), :mod:`.provenance` (where a report
comes from) and :mod:`.run` (re-running a baseline's spec and :func:`run_gate`).
"""

from __future__ import annotations

from rag_lab.eval.gate.changes import QueryChange
from rag_lab.eval.gate.compare import changed_params, compare_reports, query_changes
from rag_lab.eval.gate.result import (
    DEFAULT_GATE_METRICS,
    ERRORS_METRIC,
    METRIC_FAMILIES,
    TIER_ORDER,
    GateError,
    GatePolicy,
    GateResult,
    MetricCheck,
)
from rag_lab.eval.gate.run import baseline_spec, evaluate_spec, parse_metric_tolerances, run_gate
from rag_lab.eval.gate.stats import PairedTest, effect_size, holm_adjust, paired_test, questions_to_settle

__all__ = [
    "DEFAULT_GATE_METRICS",
    "METRIC_FAMILIES",
    "GateError",
    "GatePolicy",
    "GateResult",
    "MetricCheck",
    "QueryChange",
    "TIER_ORDER",
    "PairedTest",
    "changed_params",
    "compare_reports",
    "holm_adjust",
    "paired_test",
    "query_changes",
    "questions_to_settle",
    "run_gate",
    # used by the CLI and the tests
    "ERRORS_METRIC",
    "baseline_spec",
    "effect_size",
    "evaluate_spec",
    "parse_metric_tolerances",
]
