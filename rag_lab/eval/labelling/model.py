"""The labelling model: per-question review state (accept / edit / reject) and graded passage
labels, as plain data, with no widget and no browser.

A :class:`QuestionState` is read from and written to one ``queries.jsonl`` row. What a review
adds to the row (everything else of the row is kept as it was):

* ``metadata.reviewed``: ``true`` once accepted, edited or rejected (what
  :mod:`rag_lab.eval.review` and the gate read);
* ``metadata.review``: ``{"status": "accepted" | "edited" | "rejected", "by", "at", "original":
  {"question", "gold_ids", "relevance"}}``; ``original`` is the row as it was before its first
  label, so an edit keeps the generated text beside the new one and grades can be changed again;
* ``metadata.labels``: one ``{"passage", "doc_id", "grade", "by", "at"}`` per graded passage
  (grade 2 relevant, 1 partly, 0 not);
* ``relevance``: per document the highest grade of its labelled passages, over the original
  grades (graded nDCG's gains);
* ``gold_ids``: the original gold ids not graded 0, then the other documents graded 1 or 2 (the
  binary metrics' relevant set, as trec_eval's relevance level 1 counts).

A rejected question stays in the file, marked; :func:`rag_lab.eval.datasets.load_dataset` sets it
aside (``Dataset.rejected``) so no evaluation scores it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rag_lab.eval.datasets import QueryItem
from rag_lab.eval.datasets.schema import _error

__all__ = [
    "GRADES",
    "GRADE_NAMES",
    "STATUSES",
    "PassageLabel",
    "QuestionState",
    "candidate_passages",
    "state_from_item",
    "utc_now",
]

#: the grades a passage can get, best first
GRADES: tuple[int, ...] = (2, 1, 0)
GRADE_NAMES: dict[int, str] = {2: "relevant", 1: "partly", 0: "not relevant"}
#: review statuses; "unreviewed" is never written (a row without ``review`` is unreviewed)
STATUSES: tuple[str, ...] = ("unreviewed", "accepted", "edited", "rejected")

Clock = Callable[[], str]


def candidate_passages(metadata: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(passage id, document id)`` of a generated question's ``candidate_passages`` (other
    passages that hold its answer, gold candidates to grade); entries that are not
    ``{"passage": str, "doc_id": str}`` are skipped."""
    raw = metadata.get("candidate_passages")
    out: list[tuple[str, str]] = []
    for c in raw if isinstance(raw, list) else []:
        if isinstance(c, Mapping) and isinstance(c.get("passage"), str) and isinstance(c.get("doc_id"), str):
            out.append((c["passage"], c["doc_id"]))
    return out


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the second with a ``Z`` (the ``at`` of a label)."""
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class PassageLabel:
    """A person's grade of one passage (a chunk id) retrieved for a question."""

    passage: str
    doc_id: str
    grade: int
    by: str
    at: str

    def to_dict(self) -> dict[str, object]:
        return {"passage": self.passage, "doc_id": self.doc_id, "grade": self.grade, "by": self.by, "at": self.at}


@dataclass(slots=True)
class QuestionState:
    """One question under review: its current text, status and passage labels.

    ``item`` is the row as loaded (its fields other than the question, gold and relevance are
    written back unchanged); ``original_*`` are the values before the first label."""

    item: QueryItem
    text: str
    status: str = "unreviewed"
    by: str = ""
    at: str = ""
    labels: dict[str, PassageLabel] = field(default_factory=dict)
    original_question: str = ""
    original_gold_ids: list[str] = field(default_factory=list)
    original_relevance: dict[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def reviewed(self) -> bool:
        return self.status != "unreviewed"

    @property
    def synthetic(self) -> bool:
        return self.item.metadata.get("synthetic") is True

    # ------------------------------------------------------------------ edits

    def accept(self, by: str, at: str) -> None:
        """Accept the question as it is (an edited one stays edited: its text is not the original)."""
        self.status = "edited" if self.text != self.original_question else "accepted"
        self.by, self.at = by, at

    def edit(self, text: str, by: str, at: str) -> None:
        """Replace the question's text (blank text refused); editing back to the original text
        makes it plainly accepted."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"question {self.id}: the edited text must not be empty or blank, got {text!r}")
        self.text = text.strip()
        self.status = "edited" if self.text != self.original_question else "accepted"
        self.by, self.at = by, at

    def reject(self, by: str, at: str) -> None:
        """Mark the question rejected (kept in the file, left out of evaluations)."""
        self.status = "rejected"
        self.by, self.at = by, at

    def grade(self, passage: str, doc_id: str, grade: int, by: str, at: str) -> None:
        """Grade one passage 2 (relevant), 1 (partly) or 0 (not relevant)."""
        if isinstance(grade, bool) or grade not in GRADES:
            raise ValueError(f"question {self.id}: a grade is 2 (relevant), 1 (partly) or 0 (not), got {grade!r}")
        if not passage or not doc_id:
            raise ValueError(f"question {self.id}: a graded passage needs its chunk id and document id")
        self.labels[passage] = PassageLabel(passage, doc_id, grade, by, at)

    def clear_grade(self, passage: str) -> None:
        self.labels.pop(passage, None)

    # ------------------------------------------------------------------ derived row fields

    def doc_grades(self) -> dict[str, int]:
        """Per labelled document, the highest grade among its labelled passages."""
        out: dict[str, int] = {}
        for lab in self.labels.values():
            out[lab.doc_id] = max(out.get(lab.doc_id, 0), lab.grade)
        return out

    def relevance(self) -> dict[str, int]:
        return {**self.original_relevance, **self.doc_grades()}

    def gold_ids(self) -> list[str]:
        grades = self.doc_grades()
        kept = [g for g in self.original_gold_ids if grades.get(g, 1) >= 1]
        return kept + [d for d, g in grades.items() if g >= 1 and d not in kept]

    def to_item(self) -> QueryItem:
        """The row to write: unchanged when never labelled, else with the fields of the module
        docstring."""
        if not self.reviewed and not self.labels:
            return self.item
        meta = {k: v for k, v in self.item.metadata.items() if k not in ("review", "labels", "reviewed")}
        if self.reviewed or "reviewed" in self.item.metadata:
            meta["reviewed"] = self.reviewed
        if self.reviewed:
            meta["review"] = {"status": self.status, "by": self.by, "at": self.at}
        else:
            meta["review"] = {"status": "unreviewed"}
        meta["review"]["original"] = {
            "question": self.original_question,
            "gold_ids": list(self.original_gold_ids),
            "relevance": dict(self.original_relevance),
        }
        if self.labels:
            meta["labels"] = [lab.to_dict() for lab in self.labels.values()]
        return QueryItem(
            id=self.item.id,
            question=self.text,
            answers=list(self.item.answers),
            gold_ids=self.gold_ids(),
            metadata=meta,
            relevance=self.relevance(),
        )

    def comparable(self) -> tuple[object, ...]:
        """The state as a tuple (what a save and reload must give back)."""
        return (
            self.id,
            self.text,
            self.status,
            self.by,
            self.at,
            sorted((lab.passage, lab.doc_id, lab.grade, lab.by, lab.at) for lab in self.labels.values()),
            self.original_question,
            list(self.original_gold_ids),
            dict(sorted(self.original_relevance.items())),
        )


def _where(path: str, line: int, name: str, value: object, problem: str) -> ValueError:
    return _error(Path(path), line, name, value, problem)


def state_from_item(item: QueryItem, path: str, line: int) -> QuestionState:
    """Read a row's review state; a malformed ``metadata.review`` / ``metadata.labels`` raises
    :class:`~rag_lab.eval.datasets.DatasetError` naming the file, line and field."""
    meta = item.metadata
    review = meta.get("review")
    if review is None:
        return QuestionState(
            item=item,
            text=item.question,
            original_question=item.question,
            original_gold_ids=list(item.gold_ids),
            original_relevance=dict(item.relevance),
        )
    if not isinstance(review, Mapping):
        raise _where(path, line, "metadata.review", review, "must be a JSON object")
    status = review.get("status")
    if status not in STATUSES:
        raise _where(path, line, "metadata.review.status", status, f"must be one of {', '.join(STATUSES)}")
    original = review.get("original", {})
    if not isinstance(original, Mapping):
        raise _where(path, line, "metadata.review.original", original, "must be a JSON object")
    oq = original.get("question", item.question)
    if not isinstance(oq, str) or not oq.strip():
        raise _where(path, line, "metadata.review.original.question", oq, "must be a non-empty string")
    og = original.get("gold_ids", item.gold_ids)
    if not isinstance(og, list) or not all(isinstance(g, str) and g for g in og):
        raise _where(path, line, "metadata.review.original.gold_ids", og, "must be a list of document ids")
    orel = original.get("relevance", {})
    if not isinstance(orel, Mapping) or not all(
        isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in orel.values()
    ):
        raise _where(path, line, "metadata.review.original.relevance", orel, "must map document ids to grades >= 0")
    by, at = review.get("by", ""), review.get("at", "")
    if status != "unreviewed":
        for name, v in (("by", by), ("at", at)):
            if not isinstance(v, str) or not v:
                raise _where(
                    path, line, f"metadata.review.{name}", v, "a review needs who and when (non-empty strings)"
                )
    if (meta.get("reviewed") is True) != (status != "unreviewed"):
        raise _where(
            path, line, "metadata.reviewed", meta.get("reviewed"), f"disagrees with metadata.review.status {status!r}"
        )
    st = QuestionState(
        item=item,
        text=item.question,
        status=status,
        by=by if status != "unreviewed" else "",
        at=at if status != "unreviewed" else "",
        original_question=oq,
        original_gold_ids=list(og),
        original_relevance=dict(orel),
    )
    raw_labels = meta.get("labels", [])
    if not isinstance(raw_labels, list):
        raise _where(path, line, "metadata.labels", raw_labels, "must be a list of passage labels")
    for i, lab in enumerate(raw_labels):
        where = f"metadata.labels[{i}]"
        if not isinstance(lab, Mapping) or set(lab) != {"passage", "doc_id", "grade", "by", "at"}:
            raise _where(path, line, where, lab, "must be an object with passage, doc_id, grade, by, at")
        for name in ("passage", "doc_id", "by", "at"):
            if not isinstance(lab[name], str) or not lab[name]:
                raise _where(path, line, f"{where}.{name}", lab[name], "must be a non-empty string")
        if isinstance(lab["grade"], bool) or lab["grade"] not in GRADES:
            raise _where(path, line, f"{where}.grade", lab["grade"], "must be 2 (relevant), 1 (partly) or 0 (not)")
        if lab["passage"] in st.labels:
            raise _where(path, line, f"{where}.passage", lab["passage"], "labelled twice")
        st.labels[lab["passage"]] = PassageLabel(lab["passage"], lab["doc_id"], lab["grade"], lab["by"], lab["at"])
    return st
