"""Retrieval per conversation turn, and what the query rewrite does to it.

A question's turn is its place in its conversation: 1 plus the earlier turns ``history.jsonl``
replays before it (:attr:`~rag_lab.eval.records.QueryRecord.turn`). :func:`per_turn` averages
each retrieval metric over the questions of each turn, so a drop on later turns (where the
question leans on the conversation: "and who designed it?") shows apart from the first.

:func:`rewrite_effect` pairs two evaluations of the same questions, one with query
understanding's rewrite and one without (``enable_rewrite: false``, the question searched as
asked), turn by turn: the mean with, without, their difference and its 95 % interval (the gate's
paired bootstrap, :func:`rag_lab.eval.gate.stats.paired_test`), and how many questions the
rewrite actually changed. ``rag-lab eval --per-turn`` prints the first, ``--rewrite-effect`` both.

>>> from rag_lab.eval.metrics import RetrievalReport
>>> from rag_lab.eval.records import QueryRecord
>>> rows = [{"qid": q, "recall@10": v} for q, v in (("a", 1.0), ("b", 0.0), ("c", 0.5))]
>>> recs = [QueryRecord(q, "", ["d"], [], turn=t) for q, t in (("a", 1), ("b", 2), ("c", 2))]
>>> [(t.turn, t.n, t.means["recall@10"]) for t in per_turn(rows, recs, ["recall@10"])]
[(1, 1, 1.0), (2, 2, 0.25)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rag_lab.eval.gate.stats import paired_test
from rag_lab.eval.records import QueryRecord

__all__ = ["RewriteEffect", "TurnRow", "format_effect", "format_turns", "per_turn", "rewrite_effect"]

#: the metrics the tables show by default
TURN_METRICS = ("recall@10", "ndcg@10", "mrr")


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One turn index: how many questions, and each metric's mean over them."""

    turn: int
    n: int
    means: dict[str, float]


@dataclass(frozen=True, slots=True)
class RewriteEffect:
    """One turn index of :func:`rewrite_effect`."""

    turn: int
    n: int
    with_rewrite: float
    without: float
    delta: float
    ci: tuple[float, float]
    #: questions whose searched text differed between the two evaluations
    rewritten: int


def _by_turn(
    rows: Sequence[Mapping[str, float | int | str]], records: Sequence[QueryRecord]
) -> dict[int, list[Mapping[str, float | int | str]]]:
    scored = {str(r["qid"]): r for r in rows}
    out: dict[int, list[Mapping[str, float | int | str]]] = {}
    for rec in records:
        row = scored.get(rec.qid)
        if row is not None:  # a question without gold is not scored
            out.setdefault(int(rec.turn), []).append(row)
    return dict(sorted(out.items()))


def per_turn(
    rows: Sequence[Mapping[str, float | int | str]],
    records: Sequence[QueryRecord],
    metrics: Sequence[str] = TURN_METRICS,
) -> list[TurnRow]:
    """Per turn index (ascending): the scored questions and each metric's mean over them."""
    return [
        TurnRow(turn, len(group), {m: math.fsum(float(r[m]) for r in group) / len(group) for m in metrics})
        for turn, group in _by_turn(rows, records).items()
    ]


def rewrite_effect(
    with_rows: Sequence[Mapping[str, float | int | str]],
    with_records: Sequence[QueryRecord],
    without_rows: Sequence[Mapping[str, float | int | str]],
    without_records: Sequence[QueryRecord],
    metric: str,
) -> list[RewriteEffect]:
    """Per turn index, ``metric`` with and without the rewrite over the questions scored in both
    (paired by question id)."""
    without = {str(r["qid"]): float(r[metric]) for r in without_rows}
    searched = {rec.qid: rec.search_query for rec in without_records}
    out: list[RewriteEffect] = []
    for turn, group in _by_turn(with_rows, with_records).items():
        pairs = [(float(r[metric]), without[str(r["qid"])]) for r in group if str(r["qid"]) in without]
        if not pairs:
            continue
        qids = {str(r["qid"]) for r in group}
        rewritten = sum(1 for rec in with_records if rec.qid in qids and rec.search_query != searched.get(rec.qid))
        diffs = [a - b for a, b in pairs]
        a_mean = math.fsum(a for a, _ in pairs) / len(pairs)
        b_mean = math.fsum(b for _, b in pairs) / len(pairs)
        test = paired_test(diffs)
        out.append(RewriteEffect(turn, len(pairs), a_mean, b_mean, math.fsum(diffs) / len(diffs), test.ci, rewritten))
    return out


def format_turns(rows: Sequence[TurnRow], metrics: Sequence[str] = TURN_METRICS) -> str:
    """A text table: one line per turn index."""
    head = f"{'turn':>4} {'n':>5} " + " ".join(f"{m:>10}" for m in metrics)
    lines = [head] + [f"{r.turn:>4} {r.n:>5} " + " ".join(f"{r.means[m]:>10.4f}" for m in metrics) for r in rows]
    return "\n".join(lines)


def format_effect(effects: Sequence[RewriteEffect], metric: str) -> str:
    """A text table of :func:`rewrite_effect`: one line per turn index."""
    head = f"{'turn':>4} {'n':>5} {'rewritten':>9} {'with':>8} {'without':>8} {'delta':>8}  95% interval"
    lines = [f"{metric}, with and without the query rewrite:", head]
    for e in effects:
        lines.append(
            f"{e.turn:>4} {e.n:>5} {e.rewritten:>9} {e.with_rewrite:>8.4f} {e.without:>8.4f} {e.delta:>+8.4f}  "
            f"[{e.ci[0]:+.4f}, {e.ci[1]:+.4f}]"
        )
    return "\n".join(lines)
