"""What the regression gate decides: the policy (tolerances, test, power, correction), one
:class:`MetricCheck` per suite and metric with its verdict tier, one :class:`QueryChange` per
changed question, and the :class:`GateResult` with its verdict, exit code and files (the views are
in :mod:`.render`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_lab.eval.gate.changes import QueryChange
from rag_lab.eval.gate.render import gate_junit, gate_markdown, gate_summary_markdown, gate_table
from rag_lab.eval.gate.stats import TESTS
from rag_lab.eval.metric_defs import GATE_TOLERANCE, metric_families
from rag_lab.eval.report import EvalReport

#: metric family of every metric gated by default (one name per quantity: no aliases)
METRIC_FAMILIES: dict[str, str] = metric_families()
#: Metrics gated by default, those present in the baseline, saturated ones included (against drops).
DEFAULT_GATE_METRICS: tuple[str, ...] = tuple(METRIC_FAMILIES)
ERRORS_METRIC = "model_errors"  # the per-suite check on pipeline / model errors


class GateError(ValueError):
    """The baseline or current report cannot be compared (exit code 2)."""


@dataclass
class GatePolicy:
    metrics: Sequence[str] | None = None  # None: DEFAULT_GATE_METRICS present in the baseline
    tolerance: float = GATE_TOLERANCE
    tolerances: dict[str, float] = field(default_factory=dict)
    alpha: float = 0.05
    test: str = "permutation"  # "permutation" | "bootstrap"
    n_resamples: int = 10_000
    seed: int = 0
    fail_on_change: bool = False  # deterministic setups: any changed question fails the gate
    ci_level: float = 0.95
    #: an inconclusive check (mean within the tolerance, interval not ruling out a drop of it) passes
    #: only when allowed; a probable regression never does
    allow_underpowered: bool = False
    power: float = 0.8  # the power at which an inconclusive check's questions_to_settle is estimated
    correction: str = "holm"  # "holm" (across every metric check of the gate) | "none"
    #: warn when the baseline is older than this many days (0: never)
    max_age_days: float = 90.0
    #: compare against a baseline built on synthetic questions nobody reviewed (refused otherwise)
    allow_unreviewed: bool = False

    def __post_init__(self) -> None:
        if self.test not in TESTS:
            raise GateError(f"test={self.test!r}: use 'permutation' or 'bootstrap'")
        if self.correction not in ("holm", "none"):
            raise GateError(f"correction={self.correction!r}: use 'holm' or 'none'")
        if not 0 < self.alpha < 1:
            raise GateError(f"alpha={self.alpha!r} must be in (0, 1)")
        if not 0 < self.power < 1:
            raise GateError(f"power={self.power!r} must be in (0, 1)")
        if not 0 < self.ci_level < 1:
            raise GateError(f"ci_level={self.ci_level!r} must be in (0, 1)")
        if not (isinstance(self.n_resamples, int) and self.n_resamples >= 100):
            raise GateError(f"n_resamples={self.n_resamples!r} must be an integer >= 100")
        if not (math.isfinite(self.max_age_days) and self.max_age_days >= 0):
            raise GateError(f"max_age_days={self.max_age_days!r} must be a number >= 0")
        for name, tol in {"tolerance": self.tolerance, **self.tolerances}.items():
            if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
                raise GateError(f"tolerance for {name} = {tol!r} must be a number >= 0")

    def tolerance_for(self, metric: str) -> float:
        return float(self.tolerances.get(metric, self.tolerance))

    def to_dict(self) -> dict[str, object]:
        return {
            "metrics": list(self.metrics) if self.metrics is not None else None,
            "tolerance": self.tolerance,
            "tolerances": dict(self.tolerances),
            "alpha": self.alpha,
            "test": self.test,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "fail_on_change": self.fail_on_change,
            "ci_level": self.ci_level,
            "allow_underpowered": self.allow_underpowered,
            "power": self.power,
            "correction": self.correction,
            "max_age_days": self.max_age_days,
            "allow_unreviewed": self.allow_unreviewed,
        }


#: status -> verdict tier
TIERS: dict[str, str] = {
    "regression": "regression",
    "nan": "regression",
    "missing": "regression",
    "errors": "regression",
    "probable_regression": "probable regression",
    "inconclusive": "inconclusive",
    "improved": "improvement",
    "ok": "pass",
    "unchanged": "pass",
    "no_samples": "pass",
}
TIER_ORDER: tuple[str, ...] = ("regression", "probable regression", "inconclusive", "improvement", "pass")
#: p-value attribute -> its corrected attribute
ADJUSTED: dict[str, str] = {"p_value": "p_adjusted", "p_up": "p_up_adjusted", "p_ni": "p_ni_adjusted"}


@dataclass
class MetricCheck:
    suite: str
    metric: str
    baseline: float
    current: float
    delta: float
    tolerance: float
    p_value: float
    n_pairs: int
    bad_baseline: int  # NaN / failed samples
    bad_current: int
    #: "regression" | "nan" | "missing" | "errors" (tier regression), "probable_regression",
    #: "inconclusive", "improved", "ok" (moved, within the tolerance) | "unchanged" (no question
    #: moved) | "no_samples" (no finite value to pair: NaN on both sides)
    status: str
    note: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan
    effect_size: float = math.nan
    n_worse: int = 0
    n_better: int = 0
    p_adjusted: float = math.nan  # Holm-adjusted one-sided p of a drop (= p without correction)
    p_up: float = math.nan  # one-sided p of a rise (improvement), and adjusted
    p_up_adjusted: float = math.nan
    p_ni: float = math.nan  # non-inferiority: one-sided p of "mean > -tolerance", and adjusted
    p_ni_adjusted: float = math.nan
    n_informative: int = 0  # questions whose value moved (non-zero paired differences)
    #: an inconclusive check: about how many questions would settle it (None: none would)
    n_needed: int | None = None
    saturated: str = ""  # "ceiling" (cannot rise: gated against drops) | "floor" (cannot fall) | ""
    allowed: bool = False  # an inconclusive check let through by --allow-underpowered
    gained_nan: list[str] = field(default_factory=list)  # questions finite in the baseline, NaN now
    #: questions whose judge repeats spread wider than the tolerance (in the test as their means)
    unstable: list[str] = field(default_factory=list)

    @property
    def tier(self) -> str:
        return TIERS.get(self.status, "regression")

    @property
    def failed(self) -> bool:
        if self.status == "inconclusive":
            return not self.allowed
        return self.tier in ("regression", "probable regression")

    @property
    def family(self) -> str:
        return "errors" if self.metric == ERRORS_METRIC else METRIC_FAMILIES.get(self.metric, "other")

    def to_dict(self) -> dict[str, object]:
        return {
            "suite": self.suite,
            "metric": self.metric,
            "family": self.family,
            "baseline": _num(self.baseline),
            "current": _num(self.current),
            "delta": _num(self.delta),
            "ci": [_num(self.ci_low), _num(self.ci_high)],
            "p": _num(self.p_value),
            "p_adjusted": _num(self.p_adjusted),
            "effect_size": _num(self.effect_size),
            "tolerance": self.tolerance,
            "p_ni": _num(self.p_ni),
            "p_ni_adjusted": _num(self.p_ni_adjusted),
            "n_needed": self.n_needed,
            "n_pairs": self.n_pairs,
            "n_worse": self.n_worse,
            "n_better": self.n_better,
            "n_informative": self.n_informative,
            "saturated": self.saturated or None,
            "gained_nan": list(self.gained_nan),
            "unstable": list(self.unstable),
            "nan_baseline": self.bad_baseline,
            "nan_current": self.bad_current,
            "status": self.status,
            "tier": self.tier,
            "failed": self.failed,
            "note": self.note,
        }


def _status_word(status: str) -> str:
    return status.replace("_", " ")


def _num(v: object) -> float | None:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


@dataclass
class GateResult:
    checks: list[MetricCheck]
    policy: GatePolicy
    current: EvalReport | None = None
    changes: list[QueryChange] = field(default_factory=list)
    #: suite -> {param: [baseline value, current value]} (effective params that differ)
    params_changed: dict[str, dict[str, list[object]]] = field(default_factory=dict)
    #: the baseline's age and provenance (code version, models, dataset content) against the current run's
    warnings: list[str] = field(default_factory=list)
    #: unreviewed synthetic questions of the baseline and of the current run (``--allow-unreviewed``)
    unreviewed: dict[str, int] = field(default_factory=dict)

    def unstable_count(self) -> int:
        """Questions whose judge repeats spread wider than the tolerance, over every check."""
        return sum(len(c.unstable) for c in self.checks)

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks) and not (self.policy.fail_on_change and self.changes)

    def tiers(self) -> dict[str, list[MetricCheck]]:
        """The checks by verdict tier, in :data:`TIER_ORDER` (every tier present, maybe empty)."""
        out: dict[str, list[MetricCheck]] = {t: [] for t in TIER_ORDER}
        for c in self.checks:
            out[c.tier].append(c)
        return out

    def tier_line(self) -> str:
        """``2 regressions, 0 probable regressions, 1 inconclusive, 0 improvements, 40 passed``."""
        t = self.tiers()
        n_reg, n_prob, n_inc, n_up, n_pass = (len(t[k]) for k in TIER_ORDER)
        allowed = sum(1 for c in t["inconclusive"] if c.allowed)
        inc = f"{n_inc} inconclusive" + (f" ({allowed} allowed)" if allowed else "")
        return (
            f"{n_reg} regression{'s' if n_reg != 1 else ''}, {n_prob} probable regression{'s' if n_prob != 1 else ''}, "
            f"{inc}, {n_up} improvement{'s' if n_up != 1 else ''}, {n_pass} passed"
        )

    def test_line(self) -> str:
        pol = self.policy
        m = sum(1 for c in self.checks if c.metric != ERRORS_METRIC and math.isfinite(c.p_value))
        corr = f"Holm over {m} tested checks" if pol.correction == "holm" else "no correction"
        return f"test={pol.test}, alpha={pol.alpha:g}, {corr}"

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    def failures(self) -> list[MetricCheck]:
        return [c for c in self.checks if c.failed]

    def verdict(self) -> str:
        bad = self.failures()
        n_changed = len(self.changes)
        if not bad and not (self.policy.fail_on_change and self.changes):
            return (
                f"GATE PASSED: {len(self.checks)} checks ({self.tier_line()}); {self.test_line()}; "
                f"{n_changed} questions changed"
            )
        why = [f"{c.suite}/{c.metric} {_status_word(c.status)}" for c in bad]
        if len(why) > 8:  # the tables list them all
            why = why[:8] + [f"… {len(why) - 8} more"]
        if self.policy.fail_on_change and self.changes:
            why.append(f"{n_changed} questions changed (--fail-on-change)")
        return (
            f"GATE FAILED: {len(bad)} of {len(self.checks)} checks failed ({', '.join(why)}); {self.tier_line()}; "
            f"{self.test_line()}"
        )

    def table(self, max_changes: int = 10) -> str:
        """A fixed-width table of every check, the changed params, the worst changed questions,
        then a one-line verdict."""
        return gate_table(self, max_changes)

    def params_line(self) -> str:
        if not self.params_changed:
            return "params: unchanged from the baseline"
        merged: dict[str, list[object]] = {}
        for per in self.params_changed.values():
            merged.update(per)
        return "params changed: " + ", ".join(f"{k} {b!r} → {c!r}" for k, (b, c) in sorted(merged.items()))

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": "rag_lab.gate",
            "passed": self.passed,
            "exit_code": self.exit_code,
            "verdict": self.verdict(),
            "policy": self.policy.to_dict(),
            "checks": [c.to_dict() for c in self.checks],
            "tiers": {t: [f"{c.suite}/{c.metric}" for c in cs] for t, cs in self.tiers().items()},
            "params_changed": self.params_changed,
            "warnings": list(self.warnings),
            "unreviewed_synthetic": dict(self.unreviewed),
            "unstable": {f"{c.suite}/{c.metric}": list(c.unstable) for c in self.checks if c.unstable},
            "query_changes": [ch.to_dict() for ch in self.changes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    def junit(self) -> str:
        return gate_junit(self)

    def markdown(self, max_changes: int = 200) -> str:
        return gate_markdown(self, max_changes)

    def summary_markdown(self, max_items: int = 10) -> str:
        """A short Markdown summary for ``$GITHUB_STEP_SUMMARY`` or a PR comment: the verdict, the
        checks of every tier but the unchanged one, the worst changed questions, the warnings."""
        return gate_summary_markdown(self, max_items)
