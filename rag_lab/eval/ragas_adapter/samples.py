"""The adapter's data: metric names, :class:`RagasSample` (one evaluation sample in ragas' field
names) built from evaluation records, :class:`RagasResult` (one float per sample and metric, NaN
with a reason when not scored), and the Chinese tokens of the segmented metrics."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.records import QueryRecord

OFFLINE_METRICS: tuple[str, ...] = (
    "id_context_recall",
    "id_context_precision",
    "nonllm_context_recall",
    "nonllm_context_precision",
    "string_similarity",
    "bleu",
    "rouge_l",
    "chrf",
)
#: jieba-segmented answer metrics (rag_lab's own, for Chinese; see the package docstring)
SEGMENTED_METRICS: tuple[str, ...] = ("bleu_zh", "rouge_l_zh")
LLM_METRICS: tuple[str, ...] = ("faithfulness", "answer_relevancy", "llm_context_precision")
ALL_METRICS: tuple[str, ...] = OFFLINE_METRICS + SEGMENTED_METRICS + LLM_METRICS

_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")
_WORDISH_RE = re.compile(r"[^\W_]", re.UNICODE)


class RagasError(ValueError):
    """ragas cannot be imported, or a judge / metric is misconfigured."""


def contains_han(text: str) -> bool:
    """True when ``text`` holds a Han (Chinese) character."""
    return bool(_HAN_RE.search(text or ""))


def metric_tokens(text: str) -> list[str]:
    """Tokens for BLEU / ROUGE on Chinese text: jieba precise mode, lower-cased, punctuation and
    whitespace pieces dropped."""
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return [t.lower() for t in (p.strip() for p in jieba.lcut(text or "")) if t and _WORDISH_RE.search(t)]


@dataclass
class RagasSample:
    """One evaluation sample in ragas' field names (``qid`` is ours)."""

    qid: str
    user_input: str
    retrieved_contexts: list[str]
    retrieved_context_ids: list[str]
    reference: str
    reference_context_ids: list[str]
    reference_contexts: list[str]
    response: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def samples_from_records(records: Iterable[QueryRecord], dataset: Dataset) -> list[RagasSample]:
    """Samples from evaluation records: contexts = the final contexts (chunk texts, with their
    document ids), reference = the first reference answer, reference contexts = the gold
    documents' texts, response = the answer without citation tags."""
    from rag_lab.eval.records import answer_text

    texts = {d.id: d.text for d in dataset.corpus}
    out: list[RagasSample] = []
    for r in records:
        out.append(
            RagasSample(
                qid=r.qid,
                user_input=r.question,
                retrieved_contexts=list(r.contexts),
                retrieved_context_ids=list(r.context_doc_ids),
                reference=r.answers[0] if r.answers else "",
                reference_context_ids=list(r.gold_ids),
                reference_contexts=[texts[g] for g in r.gold_ids if g in texts],
                response=answer_text(r.answer),
            )
        )
    return out


@dataclass
class RagasResult:
    """Per-sample values (NaN when not scored) with the reason for each NaN."""

    metrics: list[str]
    qids: list[str]
    values: dict[str, list[float]]
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)  # metric -> qid -> reason
    failed: dict[str, list[str]] = field(default_factory=dict)  # metric -> qids that raised / lacked input
    #: the judge's HTTP calls (every attempt): calls, failed, tokens_in, tokens_out, cost_usd, ms
    judge: dict[str, Any] = field(default_factory=dict)
    #: ``eval --judge-repeats N``: metric -> per sample (aligned with qids) its N judge scores
    #: (NaN kept); ``values`` then holds their mean over the finite ones. Empty: scored once.
    repeats: dict[str, list[list[float]]] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        """Mean over the valid (finite) samples; NaN when there is none."""
        out: dict[str, float] = {}
        for m in self.metrics:
            ok = [v for v in self.values[m] if math.isfinite(v)]
            out[m] = math.fsum(ok) / len(ok) if ok else math.nan
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for m in self.metrics:
            vals = self.values[m]
            n_failed = len(self.failed.get(m, []))
            n_bad = sum(1 for v in vals if not math.isfinite(v))
            out[m] = {"n": len(vals), "n_valid": len(vals) - n_bad, "n_nan": n_bad - n_failed, "n_failed": n_failed}
        return out

    def per_query(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({m: self.values[m] for m in self.metrics}, index=pd.Index(self.qids, name="qid"))

    def to_dict(self) -> dict[str, object]:
        return {
            "metrics": list(self.metrics),
            "qids": list(self.qids),
            "values": self.values,
            "reasons": self.reasons,
            "failed": self.failed,
            "judge": dict(self.judge),
            **({"repeats": {m: [list(r) for r in rs] for m, rs in self.repeats.items()}} if self.repeats else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RagasResult:
        return cls(
            list(data["metrics"]),
            list(data["qids"]),
            {k: [float(x) for x in v] for k, v in data["values"].items()},
            {k: dict(v) for k, v in (data.get("reasons") or {}).items()},
            {k: list(v) for k, v in (data.get("failed") or {}).items()},
            dict(data.get("judge") or {}),
            {m: [[float(x) for x in r] for r in rs] for m, rs in (data.get("repeats") or {}).items()},
        )


class _MissingInput(ValueError):
    """The sample lacks what the metric needs (counted as failed, with this reason)."""
