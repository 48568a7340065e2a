"""Retrieval metrics over ranked document ids, checked against trec_eval (pytrec_eval).

Per-query functions take ``retrieved`` (doc ids, best first) and ``gold`` (the relevant doc ids,
binary relevance) and return a float in [0, 1]:

- ``recall_at_k``     relevant ids in the top k / |gold|                     (trec_eval ``recall_k``)
- ``precision_at_k``  relevant ids in the top k / k, even when fewer than k
                      ids were retrieved                                      (trec_eval ``P_k``)
- ``hit_at_k``        1 if any relevant id is in the top k, else 0           (trec_eval ``success_k``)
- ``mrr``             1 / rank of the first relevant id, 0 if none (or if it
                      ranks below ``k`` when ``k`` is given)                 (trec_eval ``recip_rank``)
- ``ndcg_at_k``       DCG@k / ideal DCG@k, gain 1 for a relevant id, discount
                      log2(rank + 1); the ideal ranking puts min(|gold|, k)
                      relevant ids first                                      (trec_eval ``ndcg_cut_k``)
- ``average_precision`` mean over *all* gold ids of precision at the rank of
                      each retrieved relevant id (unretrieved ones add 0);
                      optional cut at k                                       (trec_eval ``map`` /
                                                                               ``map_cut_k``)

Policies (explicit, identical in every function and in :func:`evaluate_retrieval`):

1. **Duplicate retrieved ids** are counted once: the first occurrence keeps its rank and later
   occurrences are removed, so the ids after them move up (``[a, a, b]`` ranks ``b`` second).
   ``evaluate_retrieval`` reports how many were removed per query (``n_duplicates``).
2. **A query with no results** (empty list, or absent from ``runs``) scores 0 on every metric and
   stays in the means. (trec_eval, and so pytrec_eval, silently leaves out queries that are
   absent from the run; we do not.)
3. **A query with empty gold** (an empty set in ``qrels``, or a run query absent from ``qrels``)
   cannot be scored: the per-query functions raise ``ValueError`` and ``evaluate_retrieval``
   excludes it from the means and lists it in ``RetrievalReport.excluded_queries``.
4. Ranks are 1-based; ``k`` must be an integer >= 1.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported lazily by RetrievalReport.per_query
    import pandas as pd

__all__ = [
    "RetrievalReport",
    "average_precision",
    "dedupe_ranking",
    "evaluate_retrieval",
    "hit_at_k",
    "mrr",
    "ndcg_at_k",
    "precision_at_k",
    "recall_at_k",
    "retrieval_metric_names",
]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10)


# --------------------------------------------------------------------------- input checks


def _check_k(k: int | None, *, allow_none: bool = False) -> None:
    """Raise ValueError unless ``k`` is an int >= 1 (or None when allowed)."""
    if k is None and allow_none:
        return
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")


def dedupe_ranking(retrieved: Iterable[str]) -> list[str]:
    """Return ``retrieved`` with later duplicates removed (first occurrence keeps its rank)."""
    if isinstance(retrieved, (str, bytes)):
        raise TypeError(
            f"retrieved must be a sequence of doc ids, got a single {type(retrieved).__name__} {retrieved[:80]!r}"
        )
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in retrieved:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def _gold_set(gold: Collection[str]) -> frozenset[str]:
    """Return ``gold`` as a frozenset; raise ValueError when it is empty (policy 3)."""
    if isinstance(gold, (str, bytes)):
        raise TypeError(f"gold must be a collection of doc ids, got a single {type(gold).__name__} {gold[:80]!r}")
    g = frozenset(gold)
    if not g:
        raise ValueError("gold is empty: the query cannot be scored (evaluate_retrieval excludes it)")
    return g


def _relevance(retrieved: Iterable[str], gold: Collection[str]) -> tuple[list[bool], frozenset[str]]:
    """Return the deduplicated ranking's relevance flags and the gold set."""
    g = _gold_set(gold)
    return [doc_id in g for doc_id in dedupe_ranking(retrieved)], g


# --------------------------------------------------------------------------- per-query metrics


def recall_at_k(retrieved: Sequence[str], gold: Collection[str], k: int) -> float:
    """Fraction of the gold ids found in the top ``k``."""
    _check_k(k)
    rel, g = _relevance(retrieved, gold)
    return sum(rel[:k]) / len(g)


def precision_at_k(retrieved: Sequence[str], gold: Collection[str], k: int) -> float:
    """Relevant ids in the top ``k`` divided by ``k`` (missing ranks count as non-relevant)."""
    _check_k(k)
    rel, _ = _relevance(retrieved, gold)
    return sum(rel[:k]) / k


def hit_at_k(retrieved: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if at least one gold id is in the top ``k``, else 0.0."""
    _check_k(k)
    rel, _ = _relevance(retrieved, gold)
    return 1.0 if any(rel[:k]) else 0.0


def mrr(retrieved: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """Reciprocal rank of the first gold id (0 if none, or if it ranks below ``k``)."""
    _check_k(k, allow_none=True)
    rel, _ = _relevance(retrieved, gold)
    limit = len(rel) if k is None else min(k, len(rel))
    for i in range(limit):
        if rel[i]:
            return 1.0 / (i + 1)
    return 0.0


def ndcg_at_k(
    retrieved: Sequence[str], gold: Collection[str], k: int, grades: Mapping[str, int] | None = None
) -> float:
    """nDCG@k with a log2(rank + 1) discount. Binary (``grades`` None): gain 1 per gold id,
    ideal DCG from |gold|. Graded, as trec_eval's ``ndcg_cut_k`` with graded qrels: gain = the
    document's grade (0 when it has none), ideal DCG from the grades sorted descending.

    >>> round(ndcg_at_k(["a", "b"], {"a", "b"}, 2, grades={"a": 1, "b": 3}), 4)
    0.7967
    """
    _check_k(k)
    if grades is not None:
        ranked = dedupe_ranking(retrieved)
        ideal_gains = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
        if not ideal_gains:
            raise ValueError("no document has a grade > 0: the query cannot be scored")
        dcg_g = sum(grades.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
        return dcg_g / sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    rel, g = _relevance(retrieved, gold)
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(rel[:k]) if r)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(g), k)))
    return dcg / ideal


def average_precision(retrieved: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """Average precision: sum of precision@rank at each relevant rank (<= k) / |gold|."""
    _check_k(k, allow_none=True)
    rel, g = _relevance(retrieved, gold)
    if k is not None:
        rel = rel[:k]
    hits = 0
    total = 0.0
    for i, r in enumerate(rel):
        if r:
            hits += 1
            total += hits / (i + 1)
    return total / len(g)


# --------------------------------------------------------------------------- aggregate report


def retrieval_metric_names(ks: Sequence[int]) -> list[str]:
    """Column names of the per-query table, in display order (what a report with cut-offs ``ks``
    holds per question)."""
    names: list[str] = []
    for prefix in ("recall", "precision", "hit", "ndcg", "mrr"):
        names.extend(f"{prefix}@{k}" for k in ks)
    names.extend(["mrr", "map"])
    return names


@dataclass(slots=True)
class RetrievalReport:
    """Per-query retrieval metrics plus their means, with the excluded (no-gold) queries."""

    ks: tuple[int, ...]
    rows: list[dict[str, float | int | str]]
    excluded_queries: list[str] = field(default_factory=list)

    @property
    def metric_names(self) -> list[str]:
        """Names of the metrics in :meth:`summary`, in display order."""
        return retrieval_metric_names(self.ks)

    @property
    def n_queries(self) -> int:
        """Number of queries that count in the means."""
        return len(self.rows)

    def per_query(self) -> pd.DataFrame:
        """One row per scored query, indexed by ``qid``: metrics plus n_retrieved/n_gold/n_duplicates."""
        import pandas as pd

        columns = ["qid", "n_retrieved", "n_gold", "n_duplicates", *self.metric_names]
        return pd.DataFrame(self.rows, columns=columns).set_index("qid")

    def summary(self) -> dict[str, float]:
        """Mean of each metric over the scored queries (NaN for every metric when none was scored)."""
        n = len(self.rows)
        out: dict[str, float] = {}
        for name in self.metric_names:
            out[name] = math.fsum(float(r[name]) for r in self.rows) / n if n else math.nan
        return out


def evaluate_retrieval(
    runs: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Collection[str]],
    ks: Iterable[int] = DEFAULT_KS,
    grades: Mapping[str, Mapping[str, int]] | None = None,
) -> RetrievalReport:
    """Score every query of ``qrels`` (and ``runs``) with the policies of the module docstring.

    Query order in the report: ``qrels`` order, then run-only queries (which are excluded).
    ``grades`` (``{qid: {doc_id: grade}}``, optional) make nDCG graded for the queries it names;
    the other metrics stay binary over ``qrels``.

    >>> report = evaluate_retrieval({"q1": ["d2", "d1"], "q2": ["d9"]}, {"q1": {"d1"}, "q2": {"d3"}}, ks=[1, 2])
    >>> s = report.summary()
    >>> (s["recall@2"], s["mrr"], s["precision@2"])  # q1 finds d1 at rank 2, q2 finds nothing
    (0.5, 0.25, 0.25)
    """
    ks_t = tuple(ks)
    if not ks_t:
        raise ValueError("ks must name at least one cutoff")
    for k in ks_t:
        _check_k(k)
    if len(set(ks_t)) != len(ks_t):
        raise ValueError(f"ks has duplicate cutoffs: {ks_t!r}")

    rows: list[dict[str, float | int | str]] = []
    excluded: list[str] = []
    for qid, gold in qrels.items():
        if isinstance(gold, (str, bytes)):
            raise TypeError(f"qrels[{qid!r}] must be a collection of doc ids, got {type(gold).__name__} {gold[:80]!r}")
        g = frozenset(gold)
        if not g:
            excluded.append(qid)
            continue
        raw = runs.get(qid, [])
        if isinstance(raw, (str, bytes)):
            raise TypeError(f"runs[{qid!r}] must be a sequence of doc ids, got {type(raw).__name__} {raw[:80]!r}")
        raw_list = list(raw)
        ranked = dedupe_ranking(raw_list)
        row: dict[str, float | int | str] = {
            "qid": qid,
            "n_retrieved": len(ranked),
            "n_gold": len(g),
            "n_duplicates": len(raw_list) - len(ranked),
        }
        for k in ks_t:
            row[f"recall@{k}"] = recall_at_k(ranked, g, k)
            row[f"precision@{k}"] = precision_at_k(ranked, g, k)
            row[f"hit@{k}"] = hit_at_k(ranked, g, k)
            row[f"ndcg@{k}"] = ndcg_at_k(ranked, g, k, None if grades is None else grades.get(qid))
            row[f"mrr@{k}"] = mrr(ranked, g, k)
        row["mrr"] = mrr(ranked, g)
        row["map"] = average_precision(ranked, g)
        rows.append(row)
    excluded.extend(qid for qid in runs if qid not in qrels)
    return RetrievalReport(ks=ks_t, rows=rows, excluded_queries=excluded)
