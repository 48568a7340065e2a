"""One evaluated question as data (:class:`QueryRecord`) and the answer text string metrics see.

Below :mod:`~rag_lab.eval.runner`, :mod:`~rag_lab.eval.ragas_adapter` and
:mod:`~rag_lab.eval.report`, which all read records, so none of them imports another for it
(``tests/test_import_layers.py``). ``rag_lab.eval.runner`` re-exports both names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import QueryItem
    from rag_lab.lab.lab import Run

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
    #: the question's position in its conversation (1 + the earlier turns replayed before it)
    turn: int = 1
    #: the text the search ran: the rewrite when query understanding gave one ("" when not searched)
    search_query: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def record_from_run(q: QueryItem, run: Run, titles: Mapping[str, str] | None = None, turn: int = 1) -> QueryRecord:
    """A :class:`QueryRecord` from a dataset query and the lab's :class:`Run` (``titles``: corpus
    id -> title, for the gold documents' titles; ``turn``: its position in its conversation)."""
    stage_ms: dict[str, float] = {}
    for t in run.timings:
        stage_ms[t.event] = stage_ms.get(t.event, 0.0) + float(t.duration_ms)
    from rag_lab.tuning.funnel import build_funnel

    return QueryRecord(
        qid=q.id,
        question=q.question,
        gold_ids=list(q.gold_ids),
        answers=list(q.answers),
        retrieved_doc_ids=list(run.retrieved_doc_ids),
        context_ids=[r.id for r in run.references],
        context_doc_ids=[r.knowledge_id for r in run.references],
        contexts=[r.content for r in run.references],
        context_titles=[r.knowledge_title for r in run.references],
        context_scores=[float(r.score) for r in run.references],
        gold_titles=[(titles or {}).get(g, "") for g in q.gold_ids],
        answer=run.answer,
        latency_ms=float(run.total_ms),
        stage_ms=stage_ms,
        error=run.error,
        is_fallback=bool(run.is_fallback),
        model_calls=run.ledger.calls_by_kind() if run.ledger is not None else {},
        tokens_in=run.ledger.tokens_in if run.ledger is not None else 0,
        tokens_out=run.ledger.tokens_out if run.ledger is not None else 0,
        cost_usd=run.ledger.cost if run.ledger is not None else 0.0,
        funnel=build_funnel(run.diagnostics, run.references, q.gold_ids).to_dict(),
        turn=turn,
        search_query=_searched(run.diagnostics.get("search")),
    )


def _searched(search: object) -> str:
    """The query text the search stage recorded (a diagnostics object or its dict form)."""
    query = search.get("query") if isinstance(search, Mapping) else getattr(search, "query", None)
    return query if isinstance(query, str) else ""


def failed_funnel(gold_ids: Iterable[str]) -> dict[str, object]:
    """The funnel of a question whose run raised: nothing at any stage (:mod:`rag_lab.eval.funnel`)."""
    return {"error": True, "n_gold": len(set(gold_ids))}
