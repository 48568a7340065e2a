"""One question whose behaviour differs from the baseline (:class:`QueryChange`), as the gate lists
it (re-exported by :mod:`.result`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["QueryChange"]


@dataclass
class QueryChange:
    """One question whose behaviour differs from the baseline."""

    suite: str
    qid: str
    question: str
    changed: list[str]  # of "error", "nan", "ranking", "contexts", "answer", "metrics"
    deltas: dict[str, float]  # gated metric -> current - baseline (non-zero only)
    baseline_ids: list[str] = field(default_factory=list)
    current_ids: list[str] = field(default_factory=list)
    baseline_answer: str = ""
    current_answer: str = ""
    gold_ids: list[str] = field(default_factory=list)
    baseline_error: str = ""
    current_error: str = ""
    nan_metrics: list[str] = field(default_factory=list)  # gated metrics finite in the baseline, NaN now

    @property
    def gained_failure(self) -> bool:
        """A new pipeline / model error, or a metric that could no longer be scored."""
        return bool(self.current_error and not self.baseline_error) or bool(self.nan_metrics)

    @property
    def worst(self) -> float:
        """The largest drop on a gated metric (negative), else 0 (or the smallest rise)."""
        return min(self.deltas.values()) if self.deltas else 0.0

    def describe(self) -> str:
        parts = []
        if "error" in self.changed:
            if self.current_error and not self.baseline_error:
                parts.append(f"new error: {_short(self.current_error)}")
            elif self.baseline_error and not self.current_error:
                parts.append("error gone")
            else:
                parts.append(f"error changed: {_short(self.current_error)}")
        if self.nan_metrics:
            parts.append("became NaN: " + ", ".join(self.nan_metrics))
        if "ranking" in self.changed:
            parts.append(f"ranking {_ids(self.baseline_ids)} → {_ids(self.current_ids)}")
        if "contexts" in self.changed:
            parts.append("final contexts")
        if "answer" in self.changed:
            parts.append("answer")
        drops = ", ".join(f"{m} {d:+.3f}" for m, d in sorted(self.deltas.items(), key=lambda kv: kv[1]))
        return "; ".join(parts) + (f" ({drops})" if drops else "")

    def to_dict(self) -> dict[str, object]:
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
            "baseline_error": self.baseline_error,
            "current_error": self.current_error,
            "nan_metrics": list(self.nan_metrics),
        }


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _ids(ids: Sequence[str], n: int = 3) -> str:
    head = ", ".join(ids[:n])
    return f"[{head}{', …' if len(ids) > n else ''}]"
