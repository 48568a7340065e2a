"""Metrics as objects: every metric rag_lab reports declares its name, family, range and direction
(higher is better or not), whether the gate checks it by default, and a one-line meaning.

One source for every reader: report validation (:mod:`rag_lab.eval.report.schema`: values inside
the declared range, known names), the gate (families, default set, saturation: a metric at its
best value can only get worse), sweep objectives (direction) and the docs.

>>> metric("ndcg@10").family, metric("ndcg@10").k, metric("ndcg@10").bounds
('retrieval', 10, (0.0, 1.0))
>>> metric("latency_ms").higher_is_better
False
>>> is_known_metric("ndcg@0"), is_known_metric("recall@3")
(False, True)
>>> metric("fused.recall@10").family, metric("funnel.lost_at.rerank").higher_is_better
('funnel', False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GATE_TOLERANCE", "Metric", "DEFAULT_GATE_METRICS", "is_known_metric", "metric", "metric_families"]


#: the gate's default tolerance (how far a mean may drop before it can be a regression); also where
#: judge repeats spread too wide to be stable (:mod:`rag_lab.eval.judge.repeats`)
GATE_TOLERANCE = 0.02


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric: ``low``/``high`` bound every valid per-question value (inclusive)."""

    name: str
    family: str  # "retrieval" | "ragas retrieval" | "answer similarity" | "LLM judge" | "latency" | "funnel"
    meaning: str
    low: float = 0.0
    high: float = 1.0
    higher_is_better: bool = True
    gated_by_default: bool = False
    k: int | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)

    @property
    def best(self) -> float:
        return self.high if self.higher_is_better else self.low

    @property
    def worst(self) -> float:
        return self.low if self.higher_is_better else self.high

    def contains(self, value: float) -> bool:
        """``value`` is a finite number inside the declared range."""
        return math.isfinite(value) and self.low <= value <= self.high

    def saturated(self, mean: float, tolerance: float = 0.0) -> str:
        """``"ceiling"`` when a mean within ``tolerance`` of the best value cannot rise by more
        than the tolerance, ``"floor"`` when it cannot fall by more than it, else ``""``."""
        if not math.isfinite(mean) or not (math.isfinite(self.low) and math.isfinite(self.high)):
            return ""
        up = self.best - mean if self.higher_is_better else mean - self.best
        down = mean - self.worst if self.higher_is_better else self.worst - mean
        if up <= tolerance:
            return "ceiling"
        if down <= tolerance:
            return "floor"
        return ""


_K_FAMILIES: dict[str, str] = {
    "recall": "share of the gold documents in the top k",
    "precision": "share of the top k that is gold (k in the denominator even when fewer were retrieved)",
    "hit": "1 when any gold document is in the top k",
    "ndcg": "discounted cumulative gain of the top k over the ideal ranking's (gain 1 per gold document)",
    "mrr": "1 / rank of the first gold document when it is in the top k, else 0",
}

#: metrics gated by default (one name per quantity: aliases such as id_context_recall = recall@10
#: on these pipelines, or ndcg@5 next to ndcg@10, are reported but not gated twice)
DEFAULT_GATE_METRICS: tuple[str, ...] = (
    "ndcg@10",
    "recall@5",
    "recall@10",
    "precision@5",
    "hit@1",
    "mrr",
    "map",
    "id_context_precision",
    "nonllm_context_precision",
    "string_similarity",
    "bleu",
    "rouge_l",
    "chrf",
    "bleu_zh",
    "rouge_l_zh",
    "faithfulness",
    "answer_relevancy",
    "llm_context_precision",
)

_FIXED: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("mrr", "retrieval", "1 / rank of the first gold document, 0 when none is retrieved"),
        Metric("map", "retrieval", "mean over every gold document of the precision at its rank (0 when missing)"),
        Metric("id_context_recall", "ragas retrieval", "gold document ids found among the contexts' ids"),
        Metric("id_context_precision", "ragas retrieval", "contexts' distinct document ids that are gold"),
        Metric("nonllm_context_recall", "ragas retrieval", "gold documents matched (Levenshtein > 0.5) by a context"),
        Metric(
            "nonllm_context_precision",
            "ragas retrieval",
            "average precision of the contexts matching (>= 0.5) some gold document",
        ),
        Metric("string_similarity", "answer similarity", "1 - normalised Levenshtein distance to the reference"),
        Metric("bleu", "answer similarity", "sacrebleu corpus BLEU (/100) against the reference"),
        Metric("rouge_l", "answer similarity", "ROUGE-L F-measure (rouge_score's ASCII tokenizer)"),
        Metric("chrf", "answer similarity", "character n-gram F-score (/100)"),
        Metric("bleu_zh", "answer similarity", "sentence BLEU (/100) over jieba tokens (Chinese)"),
        Metric("rouge_l_zh", "answer similarity", "ROUGE-L F-measure over jieba tokens (Chinese)"),
        Metric("faithfulness", "LLM judge", "share of the answer's claims the contexts support (judge)"),
        Metric(
            "answer_relevancy",
            "LLM judge",
            "mean cosine between the question and questions a judge generates from the answer",
            low=-1.0,
        ),
        Metric("llm_context_precision", "LLM judge", "judge-rated precision of the contexts against the reference"),
        Metric("latency_ms", "latency", "mean wall time per question (ms)", high=math.inf, higher_is_better=False),
        Metric(
            "p95_latency_ms",
            "latency",
            "95th percentile of the wall time per question (ms)",
            high=math.inf,
            higher_is_better=False,
        ),
    )
}


def metric(name: str) -> Metric:
    """The :class:`Metric` called ``name``: a fixed name, or ``recall|precision|hit|ndcg|mrr@K``
    (K an integer >= 1). Raises ``KeyError`` naming the known forms."""
    fixed = _FIXED.get(name)
    if fixed is not None:
        return _gated(fixed)
    funnel = _funnel_metric(name)
    if funnel is not None:
        return funnel
    prefix, sep, k = name.partition("@")
    if sep and prefix in _K_FAMILIES and k.isdigit() and not k.startswith("0"):
        return _gated(Metric(name, "retrieval", f"{_K_FAMILIES[prefix]} (k = {k})", k=int(k)))
    raise KeyError(
        f"unknown metric {name!r}: use {', '.join(p + '@K' for p in _K_FAMILIES)} (K >= 1), "
        f"STAGE.recall|hit|ar|ndcg@K, STAGE.map or funnel.lost_at|demoted_at.STAGE / funnel.kept (the gold funnel), "
        f"or one of {', '.join(sorted(_FIXED))}"
    )


def _funnel_metric(name: str) -> Metric | None:
    """A gold-funnel metric (:mod:`rag_lab.eval.funnel`), or ``None``."""
    from rag_lab.eval.funnel import FAMILIES, parse_funnel_metric

    parsed = parse_funnel_metric(name)
    if parsed is None:
        return None
    stage, family, k = parsed
    if family == "lost_at":
        return Metric(name, "funnel", f"share of the gold documents lost at the {stage} stage", higher_is_better=False)
    if family == "demoted_at":
        return Metric(
            name,
            "funnel",
            f"share of the gold documents the {stage} stage kept but pushed below rank 10",
            higher_is_better=False,
        )
    if family == "kept":
        return Metric(name, "funnel", "share of the gold documents that reach the final contexts")
    if family == "map":
        return Metric(name, "funnel", f"average precision of the {stage} stage's whole list")
    return Metric(name, "funnel", f"{FAMILIES[family]} of the {stage} stage's list (k = {k})", k=k)


def _gated(m: Metric) -> Metric:
    if m.name in DEFAULT_GATE_METRICS and not m.gated_by_default:
        return Metric(m.name, m.family, m.meaning, m.low, m.high, m.higher_is_better, True, m.k)
    return m


def is_known_metric(name: str) -> bool:
    try:
        metric(name)
    except KeyError:
        return False
    return True


def metric_families() -> dict[str, str]:
    """``{name: family}`` of the metrics gated by default, in :data:`DEFAULT_GATE_METRICS` order."""
    return {n: metric(n).family for n in DEFAULT_GATE_METRICS}
