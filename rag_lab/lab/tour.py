"""The guided tour of notebook 01: a small bundled knowledge base, the conversation it follows and
a one-line account of what each stage changed.

The knowledge base (``tour_data/``, a dataset folder in rag_lab's own format, text written for
rag_lab) is built so that every stage acts on the tour's question: a few documents restate the
same fact almost word for word (MMR has near-duplicates to drop as λ falls), the documents are
cut into short chunks (the merge joins neighbours and expands short chunks), off-topic documents
fall below the rerank threshold, and the question is the second turn of a conversation (the merge
injects the first turn's references, so FILTER_TOP_K has more than ``rerank_top_k`` to cut).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from rag_lab.lab.diff import SnapshotDiff, diff
from rag_lab.types.chat_manage import ChatManage

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.ingest_common import IngestReport
    from rag_lab.lab.lab import Lab

__all__ = [
    "TOUR_CHUNKING",
    "TOUR_DATA",
    "TOUR_FIRST_TURN",
    "TOUR_KB",
    "TOUR_PARAMS",
    "StageChange",
    "TourData",
    "TourQuestion",
    "ingest_tour",
    "load_tour_dataset",
    "stage_change",
]

#: the dataset folder (corpus.jsonl, queries.jsonl, PROVENANCE.md)
TOUR_DATA = Path(__file__).resolve().parent / "tour_data"
TOUR_KB = "tour"


class _Chunking(TypedDict):
    """The tour KB's chunking options (``lab.kb(..., **TOUR_CHUNKING)``)."""

    chunk_size: int
    chunk_overlap: int


#: short chunks, so that neighbouring chunks of one document meet in the merge
TOUR_CHUNKING: _Chunking = {"chunk_size": 220, "chunk_overlap": 0}
#: four contexts and a threshold that the off-topic candidates do not reach
TOUR_PARAMS: dict[str, float] = {"rerank_top_k": 4, "rerank_threshold": 0.5}
#: the conversation's first turn (its references come back in the merge of the second)
TOUR_FIRST_TURN = "How did people cross the river Orrin at Kestle before 1911?"

#: the result lists each stage's diff compares (before → after the stage)
_STAGE_LISTS: dict[str, list[str | tuple[str, str]]] = {
    "chunk_search_parallel": ["search_result"],
    "chunk_rerank": [("search_result", "rerank_result")],
    "chunk_merge": [("rerank_result", "merge_result")],
    "filter_top_k": ["merge_result"],
}


@dataclass(frozen=True)
class TourQuestion:
    id: str  # noqa: A003 - the query id
    question: str
    answers: list[str]
    gold_ids: list[str]


@dataclass(frozen=True)
class TourData:
    """The tour's documents (``{"id", "title", "text"}`` dicts) and its question."""

    corpus: list[dict[str, str]]
    queries: list[TourQuestion]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_tour_dataset() -> TourData:
    """The tour's documents and its one question (with gold document ids and answers). The
    folder is in the dataset format, so ``rag_lab.eval.datasets.load_dataset(TOUR_DATA)`` loads
    and validates it too (a test does)."""
    corpus = [
        {"id": d["id"], "title": d.get("title", ""), "text": d["text"]} for d in _jsonl(TOUR_DATA / "corpus.jsonl")
    ]
    queries = [
        TourQuestion(q["id"], q["question"], list(q["answers"]), list(q["gold_ids"]))
        for q in _jsonl(TOUR_DATA / "queries.jsonl")
    ]
    return TourData(corpus, queries)


def ingest_tour(lab: Lab, kb: str = TOUR_KB) -> IngestReport:
    """Create ``kb`` with the tour's chunking and ingest the tour documents (an IngestReport)."""
    ds = load_tour_dataset()
    lab.kb(kb, **TOUR_CHUNKING)
    return lab.ingest_documents(ds.corpus, kb=kb, progress=False)


@dataclass
class StageChange:
    """What one stage changed: the snapshot diff and its summary line."""

    event: str
    diff: SnapshotDiff
    line: str

    @property
    def changed(self) -> bool:
        return not self.diff.is_empty


def stage_change(event: str, before: ChatManage, after: ChatManage) -> StageChange:
    """Diff the state before and after ``event`` and describe it in one parseable line:
    ``STAGE <event>: <list> +added -dropped moved N rescored N text N; fields: a, b`` (or
    ``STAGE <event>: no change``). Ranking stages compare their input list with their output."""
    d = diff(before, after, lists=_STAGE_LISTS.get(event, []), labels=("before " + event, "after " + event))
    parts = []
    for name, s in d.summary().items():
        if s["added"] or s["dropped"] or s["moved"] or s["rescored"] or s["text_changed"]:
            parts.append(
                f"{name} +{s['added']} -{s['dropped']} moved {s['moved']} rescored {s['rescored']} "
                f"text {s['text_changed']}"
            )
    if d.fields:
        parts.append("fields: " + ", ".join(d.changed_fields))
    return StageChange(event, d, f"STAGE {event}: " + ("; ".join(parts) if parts else "no change"))
