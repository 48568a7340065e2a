"""One evaluated question as data (:class:`QueryRecord`) and the answer text string metrics see.

Below :mod:`~rag_lab.eval.runner`, :mod:`~rag_lab.eval.ragas_adapter` and
:mod:`~rag_lab.eval.report`, which all read records, so none of them imports another for it
(``tests/test_import_layers.py``). ``rag_lab.eval.runner`` re-exports both names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["QueryRecord", "answer_text"]

_PUBLIC_TAG_RE = re.compile(r"<(?:kb|web)(?![0-9A-Za-z_])[^>]*>", re.IGNORECASE | re.DOTALL)
_SPACE_BEFORE_PUNCT_RE = re.compile(r"[ \t]+([.,;:!?。，；：！？])")


def answer_text(answer: str) -> str:
    """The answer without citation tags (``<kb …/>``, ``<web …/>``), spaces tidied: what string
    metrics compare with the reference answer."""
    text = _PUBLIC_TAG_RE.sub("", answer or "")
    text = _SPACE_BEFORE_PUNCT_RE.sub(r"\1", text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


@dataclass
class QueryRecord:
    """One question's outcome, JSON-serialisable (``to_dict`` / ``from_dict``)."""

    qid: str
    question: str
    gold_ids: list[str]
    answers: list[str]
    retrieved_doc_ids: list[str] = field(default_factory=list)
    context_ids: list[str] = field(default_factory=list)  # chunk ids of the final contexts, in order
    context_doc_ids: list[str] = field(default_factory=list)  # their document ids (aligned)
    contexts: list[str] = field(default_factory=list)  # their texts (aligned)
    context_titles: list[str] = field(default_factory=list)  # their document titles (aligned)
    context_scores: list[float] = field(default_factory=list)  # their final scores (aligned)
    gold_titles: list[str] = field(default_factory=list)  # titles of the gold documents (aligned with gold_ids)
    answer: str = ""
    latency_ms: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)
    error: str = ""
    is_fallback: bool = False
    #: the run's ledger: model calls per kind, tokens in/out, cost from the price table
    model_calls: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    #: the gold funnel (:meth:`rag_lab.tuning.funnel.QuestionFunnel.to_dict`: each gold document's
    #: rank at every stage, where it was lost and why); ``{}`` in reports written before it
    funnel: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})
