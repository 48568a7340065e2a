"""What the regression gate decides: the policy (tolerances, test, headroom), one
:class:`MetricCheck` per suite and metric, one :class:`QueryChange` per changed question, and the
:class:`GateResult` with its verdict, exit code and files (the views are in :mod:`.render`)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.eval.gate.render import gate_html, gate_junit, gate_markdown, gate_table
from rag_lab.eval.gate.stats import paired_bootstrap_pvalue, paired_permutation_pvalue
from rag_lab.eval.report import EvalReport

#: metric family of every gateable metric (one name per quantity: no aliases)
METRIC_FAMILIES: dict[str, str] = {
    "ndcg@10": "retrieval",
    "recall@5": "retrieval",
    "recall@10": "retrieval",
    "precision@5": "retrieval",
    "hit@1": "retrieval",
    "mrr": "retrieval",
    "map": "retrieval",
    "id_context_precision": "ragas retrieval",
    "nonllm_context_precision": "ragas retrieval",
    "string_similarity": "answer similarity",
    "bleu": "answer similarity",
    "rouge_l": "answer similarity",
    "chrf": "answer similarity",
    "bleu_zh": "answer similarity",
    "rouge_l_zh": "answer similarity",
    "faithfulness": "LLM judge",
    "answer_relevancy": "LLM judge",
    "llm_context_precision": "LLM judge",
}
#: Metrics gated by default (those present in the baseline with headroom); others are shown but not gated.
DEFAULT_GATE_METRICS: tuple[str, ...] = tuple(METRIC_FAMILIES)
ERRORS_METRIC = "model_errors"  # the per-suite check on pipeline / model errors


class GateError(ValueError):
    """The baseline or current report cannot be compared (exit code 2)."""


@dataclass
class GatePolicy:
    metrics: Sequence[str] | None = None  # None: DEFAULT_GATE_METRICS present in the baseline, with headroom
    tolerance: float = 0.02
    tolerances: dict[str, float] = field(default_factory=dict)
    alpha: float = 0.05
    test: str = "permutation"  # "permutation" | "bootstrap"
    n_resamples: int = 10_000
    seed: int = 0
    fail_on_change: bool = False  # deterministic setups: any changed question fails the gate
    ci_level: float = 0.95
    #: default-gated metrics need a baseline mean strictly inside (lo, hi): room to fall and to rise
    headroom: tuple[float, float] = (0.05, 0.95)

    def __post_init__(self) -> None:
        if self.test not in ("permutation", "bootstrap"):
            raise GateError(f"test={self.test!r}: use 'permutation' or 'bootstrap'")
        if not 0 < self.alpha < 1:
            raise GateError(f"alpha={self.alpha!r} must be in (0, 1)")
        lo, hi = self.headroom
        if not 0 <= lo < hi <= 1:
            raise GateError(f"headroom={self.headroom!r} must satisfy 0 <= lo < hi <= 1")
        if not 0 < self.ci_level < 1:
            raise GateError(f"ci_level={self.ci_level!r} must be in (0, 1)")
        for name, tol in {"tolerance": self.tolerance, **self.tolerances}.items():
            if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
                raise GateError(f"tolerance for {name} = {tol!r} must be a number >= 0")

    def tolerance_for(self, metric: str) -> float:
        return float(self.tolerances.get(metric, self.tolerance))

    def pvalue(self, diffs: Sequence[float]) -> float:
        fn = paired_permutation_pvalue if self.test == "permutation" else paired_bootstrap_pvalue
        return fn(diffs, self.n_resamples, self.seed)

    def to_dict(self) -> dict[str, Any]:
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
            "headroom": list(self.headroom),
        }


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
    status: str  # "ok" | "improved" | "regression" | "nan" | "missing" | "errors"
    note: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan
    effect_size: float = math.nan
    mde: float = math.nan
    min_queries: int | None = None
    n_worse: int = 0
    n_better: int = 0

    @property
    def failed(self) -> bool:
        return self.status in ("regression", "nan", "missing", "errors")

    @property
    def family(self) -> str:
        return "errors" if self.metric == ERRORS_METRIC else METRIC_FAMILIES.get(self.metric, "other")

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "metric": self.metric,
            "family": self.family,
            "baseline": _num(self.baseline),
            "current": _num(self.current),
            "delta": _num(self.delta),
            "ci": [_num(self.ci_low), _num(self.ci_high)],
            "p": _num(self.p_value),
            "effect_size": _num(self.effect_size),
            "tolerance": self.tolerance,
            "mde": _num(self.mde),
            "min_queries": self.min_queries,
            "n_pairs": self.n_pairs,
            "n_worse": self.n_worse,
            "n_better": self.n_better,
            "nan_baseline": self.bad_baseline,
            "nan_current": self.bad_current,
            "status": self.status,
            "failed": self.failed,
            "note": self.note,
        }


@dataclass
class QueryChange:
    """One question whose behaviour differs from the baseline."""

    suite: str
    qid: str
    question: str
    changed: list[str]  # of "ranking", "contexts", "answer", "metrics"
    deltas: dict[str, float]  # gated metric -> current - baseline (non-zero only)
    baseline_ids: list[str] = field(default_factory=list)
    current_ids: list[str] = field(default_factory=list)
    baseline_answer: str = ""
    current_answer: str = ""
    gold_ids: list[str] = field(default_factory=list)

    @property
    def worst(self) -> float:
        """The largest drop on a gated metric (negative), else 0 (or the smallest rise)."""
        return min(self.deltas.values()) if self.deltas else 0.0

    def describe(self) -> str:
        parts = []
        if "ranking" in self.changed:
            parts.append(f"ranking {_ids(self.baseline_ids)} → {_ids(self.current_ids)}")
        if "contexts" in self.changed:
            parts.append("final contexts")
        if "answer" in self.changed:
            parts.append("answer")
        drops = ", ".join(f"{m} {d:+.3f}" for m, d in sorted(self.deltas.items(), key=lambda kv: kv[1]))
        return "; ".join(parts) + (f" ({drops})" if drops else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "qid": self.qid,
            "question": self.question,
            "changed": list(self.changed),
            "worst": self.worst,
            "deltas": dict(self.deltas),
            "gold_ids": list(self.gold_ids),
            "baseline_ids": list(self.baseline_ids),
            "current_ids": list(self.current_ids),
            "baseline_answer": self.baseline_answer,
            "current_answer": self.current_answer,
        }


def _ids(ids: Sequence[str], n: int = 3) -> str:
    head = ", ".join(ids[:n])
    return f"[{head}{', …' if len(ids) > n else ''}]"


def _num(v: Any) -> Any:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


@dataclass
class GateResult:
    checks: list[MetricCheck]
    policy: GatePolicy
    current: EvalReport | None = None
    changes: list[QueryChange] = field(default_factory=list)
    #: suite -> {param: [baseline value, current value]} (effective params that differ)
    params_changed: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: suite -> {metric: reason} for default metrics present but not gated
    not_gated: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks) and not (self.policy.fail_on_change and self.changes)

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
                f"GATE PASSED: {len(self.checks)} checks, test={self.policy.test}, alpha={self.policy.alpha}; "
                f"{n_changed} questions changed"
            )
        why = [f"{c.suite}/{c.metric} {c.status}" for c in bad]
        if self.policy.fail_on_change and self.changes:
            why.append(f"{n_changed} questions changed (--fail-on-change)")
        return f"GATE FAILED: {len(bad)} of {len(self.checks)} checks failed ({', '.join(why)})"

    def table(self, max_changes: int = 10) -> str:
        """A fixed-width table of every check, the changed params, the worst changed questions,
        then a one-line verdict."""
        return gate_table(self, max_changes)

    def params_line(self) -> str:
        if not self.params_changed:
            return "params: unchanged from the baseline"
        merged: dict[str, list[Any]] = {}
        for per in self.params_changed.values():
            merged.update(per)
        return "params changed: " + ", ".join(f"{k} {b!r} → {c!r}" for k, (b, c) in sorted(merged.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "rag_lab.gate",
            "passed": self.passed,
            "exit_code": self.exit_code,
            "verdict": self.verdict(),
            "policy": self.policy.to_dict(),
            "checks": [c.to_dict() for c in self.checks],
            "params_changed": self.params_changed,
            "not_gated": self.not_gated,
            "query_changes": [ch.to_dict() for ch in self.changes],
        }

    def html(self) -> str:
        return gate_html(self)

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """``gate.json``, ``gate.md``, ``gate.html`` and ``gate.junit.xml`` under ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "json": out / "gate.json",
            "md": out / "gate.md",
            "html": out / "gate.html",
            "junit": out / "gate.junit.xml",
        }
        paths["json"].write_text(self.to_json(), encoding="utf-8")
        paths["md"].write_text(self.markdown(), encoding="utf-8")
        paths["html"].write_text(self.html(), encoding="utf-8")
        paths["junit"].write_text(self.junit(), encoding="utf-8")
        return paths

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    def junit(self) -> str:
        return gate_junit(self)

    def markdown(self, max_changes: int = 200) -> str:
        return gate_markdown(self, max_changes)
