"""Maximal Marginal Relevance selection (spec §6.8, seed ``SelectMMR``, Appendix A.1).

``mmr(i) = λ·score(i) − (1−λ)·max_{s ∈ selected} jaccard(tokens(i), tokens(s))``; at each step
the candidate with the greatest value wins, the earliest index on ties (the running best
starts at −∞, so ``min(k, n)`` items are always selected). With ``k == 1`` only the relevance
term matters and nothing is tokenised.

Token sets are ``tokenize_simple(enriched_passage(r))``, computed once. Redundancy is kept
incrementally: an inverted index maps each token to the candidates holding it, and after a
pick only the candidates that share a token with it are updated (all others have a Jaccard of
0 with it, which cannot raise their maximum).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, TypeVar

from rag_lab.reranking.passage import enriched_passage
from rag_lab.searchutil.text import tokenize_simple
from rag_lab.types.params import PipelineParams

__all__ = [
    "DEFAULT_MMR_LAMBDA",
    "MMRCandidate",
    "MMRStep",
    "mmr_token_sets",
    "select_mmr",
    "mmr_trace",
    "apply_mmr",
]

#: λ of the rerank stage (``PipelineParams.mmr_lambda``).
DEFAULT_MMR_LAMBDA: float = PipelineParams.model_fields["mmr_lambda"].default

R = TypeVar("R")


@dataclass(slots=True, frozen=True)
class MMRCandidate:
    """One candidate's terms at one step."""

    index: int
    relevance: float
    redundancy: float
    mmr: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"index": self.index, "relevance": self.relevance, "redundancy": self.redundancy, "mmr": self.mmr}


@dataclass(slots=True, frozen=True)
class MMRStep:
    """One greedy step: the chosen candidate and the best ones it beat (for the workbench)."""

    step: int
    index: int
    relevance: float
    redundancy: float
    mmr: float
    runner_ups: list[MMRCandidate] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (runner-ups as dicts)."""
        return {
            "step": self.step,
            "index": self.index,
            "relevance": self.relevance,
            "redundancy": self.redundancy,
            "mmr": self.mmr,
            "runner_ups": [c.to_dict() for c in self.runner_ups],
        }


def mmr_token_sets(results: Sequence[Any]) -> list[set[str]]:
    """``tokenize_simple(enriched_passage(r))`` for each result."""
    return [tokenize_simple(enriched_passage(r)) for r in results]


def _scores_of(items: Sequence[Any]) -> tuple[list[float], bool]:
    """Scores, and whether the items were plain numbers."""
    if all(isinstance(x, Real) and not isinstance(x, bool) for x in items):
        return [float(x) for x in items], True
    return [float(x.score) for x in items], False


def _token_sets(
    items: Sequence[Any], numeric: bool, token_sets: Sequence[set[str] | frozenset[str]] | None
) -> Sequence[set[str] | frozenset[str]]:
    if token_sets is not None:
        if len(token_sets) != len(items):
            raise ValueError(f"select_mmr: token_sets has {len(token_sets)} entries for {len(items)} items")
        return token_sets
    if numeric:
        raise ValueError("select_mmr: plain scores with k > 1 need token_sets")
    return mmr_token_sets(items)


def _run(
    scores: list[float],
    k: int,
    lam: float,
    tokens: Sequence[set[str] | frozenset[str]] | None,
    trace_width: int | None,
) -> tuple[list[int], list[MMRStep]]:
    """Greedy MMR core. ``tokens`` may be ``None`` only when ``k == 1``."""
    n = len(scores)
    if k <= 0 or n == 0:
        return [], []
    k = min(k, n)
    steps: list[MMRStep] = []

    redundancy = [0.0] * n
    remaining = list(range(n))
    selected: list[int] = []

    # Inverted index over interned tokens (built only when a second pick is needed).
    ids: list[list[int]] = []
    postings: list[list[int]] = []
    if k > 1:
        assert tokens is not None
        term_id: dict[str, int] = {}
        for i, tset in enumerate(tokens):
            row: list[int] = []
            for term in tset:
                tid = term_id.get(term)
                if tid is None:
                    tid = len(postings)
                    term_id[term] = tid
                    postings.append([])
                postings[tid].append(i)
                row.append(tid)
            ids.append(row)
    taken = [False] * n
    inter = [0] * n

    while len(selected) < k and remaining:
        best_pos = 0
        best = -math.inf
        for pos, i in enumerate(remaining):
            value = lam * scores[i] - (1.0 - lam) * redundancy[i]
            if value > best:
                best = value
                best_pos = pos
        chosen = remaining.pop(best_pos)
        selected.append(chosen)
        taken[chosen] = True

        if trace_width is not None:
            values = [(lam * scores[i] - (1.0 - lam) * redundancy[i], i) for i in remaining]
            values.sort(key=lambda t: (-t[0], t[1]))
            steps.append(
                MMRStep(
                    step=len(selected) - 1,
                    index=chosen,
                    relevance=scores[chosen],
                    redundancy=redundancy[chosen],
                    mmr=lam * scores[chosen] - (1.0 - lam) * redundancy[chosen],
                    runner_ups=[MMRCandidate(i, scores[i], redundancy[i], v) for v, i in values[:trace_width]],
                )
            )

        if len(selected) == k or not remaining:
            break
        # Count intersections with the new pick for candidates sharing a token with it.
        touched: list[int] = []
        for tid in ids[chosen]:
            for i in postings[tid]:
                if taken[i]:
                    continue
                if inter[i] == 0:
                    touched.append(i)
                inter[i] += 1
        size_chosen = len(ids[chosen])
        for i in touched:
            common = inter[i]
            sim = common / (len(ids[i]) + size_chosen - common)
            if sim > redundancy[i]:
                redundancy[i] = sim
            inter[i] = 0
    return selected, steps


def select_mmr(
    results_or_scores: Sequence[Any],
    k: int,
    lam: float = DEFAULT_MMR_LAMBDA,
    token_sets: Sequence[set[str] | frozenset[str]] | None = None,
) -> list[int]:
    """Indices of up to ``k`` items in MMR selection order.

    ``results_or_scores`` holds objects with ``.score`` (search results) or plain numbers.
    Token sets default to ``tokenize_simple(enriched_passage(r))`` for results; plain scores
    need ``token_sets`` when ``k > 1``. ``k == 1`` returns the index of the best
    ``λ·score`` (the earliest on ties) without tokenising.

    The second passage repeats the first, so the less relevant but new third one is picked next:

    >>> select_mmr([0.9, 0.85, 0.5], k=2, lam=0.7, token_sets=[{"red", "bridge"}, {"red", "bridge"}, {"tide"}])
    [0, 2]
    """
    if k <= 0 or len(results_or_scores) == 0:
        return []
    scores, numeric = _scores_of(results_or_scores)
    tokens = None if k == 1 else _token_sets(results_or_scores, numeric, token_sets)
    selected, _ = _run(scores, k, lam, tokens, None)
    return selected


def mmr_trace(
    results_or_scores: Sequence[Any],
    k: int,
    lam: float = DEFAULT_MMR_LAMBDA,
    token_sets: Sequence[set[str] | frozenset[str]] | None = None,
    runner_ups: int = 3,
) -> list[MMRStep]:
    """``select_mmr`` step by step: each pick's relevance, redundancy and MMR value, with the
    ``runner_ups`` best candidates left at that step (by MMR value, then index)."""
    if k <= 0 or len(results_or_scores) == 0:
        return []
    scores, numeric = _scores_of(results_or_scores)
    tokens = None if k == 1 else _token_sets(results_or_scores, numeric, token_sets)
    _, steps = _run(scores, k, lam, tokens, max(0, runner_ups))
    return steps


def apply_mmr(results: Sequence[R], k: int, lam: float = DEFAULT_MMR_LAMBDA) -> list[R]:
    """The results ``select_mmr`` picks, in selection order (§6.8)."""
    return [results[i] for i in select_mmr(results, k, lam)]
