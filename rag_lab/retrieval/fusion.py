"""Score fusion for hybrid search (spec §5.9, §5.12, §1.10) as pure functions.

* :func:`dedup_by_score` — one retriever only: keep the best hit per chunk.
* :func:`weighted_rrf` — both retrievers: weighted reciprocal-rank fusion,
  ``score(c) = wv/(k + rank_v(c)) + wk/(k + rank_k(c))`` (a term only when ``c`` is in that list;
  ranks are 1-based first occurrences).
* :func:`normalize_rrf_scores` — divides fused scores by the best attainable fused score,
  ``wv/(k+1) + wk/(k+1)`` (rank 1 in both lists), so they lie in [0, 1] and a chunk ranked first by
  both retrievers scores exactly 1. The seed asks for "weighted RRF normalised to [0, 1]"; unlike a
  min-max over the current list this keeps scores comparable across queries (a lone weak hit does
  not become 1.0) and preserves the ranking.
* :func:`fuse_hits` — the §5.12 dispatcher used by the hybrid search.

Determinism: the reference sorts unstably; here equal scores are ordered by chunk id (then the
entry id), so results never depend on hash or thread order. Inputs are never mutated: hits whose
score changes are copies.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from rag_lab.retrieval.base import IndexWithScore, RetrieveResult
from rag_lab.types.params import PipelineParams

_DEFAULTS = PipelineParams.model_fields
DEFAULT_RRF_K: int = _DEFAULTS["rrf_k"].default
DEFAULT_VECTOR_WEIGHT: float = _DEFAULTS["rrf_vector_weight"].default
DEFAULT_KEYWORD_WEIGHT: float = _DEFAULTS["rrf_keyword_weight"].default


def rescored(h: IndexWithScore, score: float) -> IndexWithScore:
    """A copy of ``h`` with another score (``dataclasses.replace`` without its per-call cost:
    positional, in the fields' order, which a test checks against the dataclass)."""
    return IndexWithScore(
        h.id,
        h.content,
        h.chunk_id,
        h.knowledge_id,
        h.knowledge_base_id,
        score,
        h.match_type,
        h.source_id,
        h.source_type,
        h.tag_id,
        h.is_enabled,
    )


def _order_key(h: IndexWithScore) -> tuple[float, str, str]:
    return (-h.score, h.chunk_id, h.id)


def resolve_rrf_k(k: int | float) -> float:
    """§1.10: the configured k if > 0, else 60."""
    return k if k and k > 0 else DEFAULT_RRF_K


def resolve_rrf_weights(vector_weight: float | None, keyword_weight: float | None) -> tuple[float, float]:
    """§1.10: both 0 / unset → (0.7, 0.3); otherwise each weight <= 0 falls back on its own."""
    wv = vector_weight or 0.0
    wk = keyword_weight or 0.0
    if wv == 0 and wk == 0:
        return DEFAULT_VECTOR_WEIGHT, DEFAULT_KEYWORD_WEIGHT
    return (wv if wv > 0 else DEFAULT_VECTOR_WEIGHT, wk if wk > 0 else DEFAULT_KEYWORD_WEIGHT)


def dedup_by_score(hits: Iterable[IndexWithScore]) -> list[IndexWithScore]:
    """Best-scoring hit per ``chunk_id`` (the first one on equal scores), sorted by score
    descending then chunk id. Raw scores are kept."""
    best: dict[str, IndexWithScore] = {}
    for h in hits:
        cur = best.get(h.chunk_id)
        if cur is None or h.score > cur.score:
            best[h.chunk_id] = h
    return sorted(best.values(), key=_order_key)


def weighted_rrf(
    vector_hits: Sequence[IndexWithScore],
    keyword_hits: Sequence[IndexWithScore],
    k: float = DEFAULT_RRF_K,
    vector_weight: float = DEFAULT_VECTOR_WEIGHT,
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
    normalize: bool = False,
) -> list[IndexWithScore]:
    """Raw weighted RRF (spec §5.12). The representative hit of a chunk is its best-scoring vector
    hit if it has one, else its first keyword hit; its score is replaced by the fused score
    (divided by :func:`rrf_max_score` when ``normalize``: :func:`normalize_rrf_scores` in the
    same pass)."""
    if k <= 0:
        raise ValueError(f"rrf k={k!r} must be > 0")
    top = _rrf_top(k, vector_weight, keyword_weight) if normalize else None
    # one pass per list: first ranks, and the representative hit of each chunk
    rank_v: dict[str, int] = {}
    rep: dict[str, IndexWithScore] = {}
    for i, h in enumerate(vector_hits, 1):
        cid = h.chunk_id
        cur = rep.get(cid)
        if cur is None:
            rank_v[cid] = i
            rep[cid] = h
        elif h.score > cur.score:
            rep[cid] = h
    rank_k: dict[str, int] = {}
    for i, h in enumerate(keyword_hits, 1):
        cid = h.chunk_id
        if cid not in rank_k:
            rank_k[cid] = i
            rep.setdefault(cid, h)
    hits = list(rep.values())
    fused: list[tuple[float, str, str, int]] = []
    for at, (cid, h) in enumerate(rep.items()):
        rv, rk = rank_v.get(cid), rank_k.get(cid)
        s = (vector_weight / (k + rv) if rv is not None else 0.0) + (
            keyword_weight / (k + rk) if rk is not None else 0.0
        )
        fused.append((-s, cid, h.id, at))
    fused.sort()  # by the raw fused score, as normalising afterwards would keep it; then chunk id, hit id
    if top is None:
        return [rescored(hits[at], -neg) for neg, _, _, at in fused]
    return [rescored(hits[at], _normalized(-neg, top)) for neg, _, _, at in fused]


def rrf_max_score(k: float, vector_weight: float, keyword_weight: float) -> float:
    """Best attainable weighted RRF score: rank 1 in both lists."""
    return vector_weight / (k + 1) + keyword_weight / (k + 1)


def normalize_rrf_scores(
    hits: Sequence[IndexWithScore], k: float, vector_weight: float, keyword_weight: float
) -> list[IndexWithScore]:
    """Fused scores divided by :func:`rrf_max_score` (so in [0, 1]); order is unchanged."""
    top = _rrf_top(k, vector_weight, keyword_weight)
    return [rescored(h, _normalized(h.score, top)) for h in hits]


def _normalized(score: float, top: float) -> float:
    return min(1.0, score / top)


def _rrf_top(k: float, vector_weight: float, keyword_weight: float) -> float:
    """:func:`rrf_max_score`, which must be positive to normalise by."""
    top = rrf_max_score(k, vector_weight, keyword_weight)
    if not top > 0:
        raise ValueError(
            f"cannot normalise RRF scores: weights vector={vector_weight!r} keyword={keyword_weight!r} give a "
            "maximum score of 0"
        )
    return top


def fuse_hits(
    vector_hits: Sequence[IndexWithScore],
    keyword_hits: Sequence[IndexWithScore],
    k: float = DEFAULT_RRF_K,
    vector_weight: float = DEFAULT_VECTOR_WEIGHT,
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
    normalize: bool = True,
) -> list[IndexWithScore]:
    """§5.12: one list empty → :func:`dedup_by_score` of the other (raw scores); both non-empty →
    weighted RRF, normalised to [0, 1] unless ``normalize`` is False.

    ``b`` is in both lists, so it leads; ``a`` (vector rank 1) beats ``c`` (keyword rank 2):

    >>> from rag_lab.retrieval.base import IndexWithScore
    >>> def hit(cid, score, match_type):
    ...     return IndexWithScore(cid, "", cid, "doc", "kb", score, match_type)
    >>> fused = fuse_hits([hit("a", 0.9, 0), hit("b", 0.7, 0)], [hit("b", 12.0, 1), hit("c", 8.0, 1)])
    >>> [(h.chunk_id, round(h.score, 4)) for h in fused]
    [('b', 0.9887), ('a', 0.7), ('c', 0.2952)]
    """
    if not keyword_hits:
        return dedup_by_score(vector_hits)
    if not vector_hits:
        return dedup_by_score(keyword_hits)
    return weighted_rrf(vector_hits, keyword_hits, k, vector_weight, keyword_weight, normalize=normalize)


# -- engine-aware vector score normalisation (§5.9) ------------------------------------------

#: engines whose vector score is a similarity in [-1, 1] mapped with (s+1)/2
_SHIFTED_ENGINES = frozenset({"milvus"})


def clamp01(x: float) -> float:
    """NaN → 0, <= 0 → 0, >= 1 → 1."""
    if math.isnan(x) or x <= 0:
        return 0.0
    return 1.0 if x >= 1 else float(x)


def normalize_vector_score(engine_type: str, score: float) -> float:
    """§5.9: Milvus ``clamp01((s+1)/2)``; every other engine (ours included) ``clamp01(s)``."""
    if engine_type.lower() in _SHIFTED_ENGINES:
        return clamp01((score + 1) / 2)
    return clamp01(score)


def normalize_engine_scores(results: Sequence[RetrieveResult]) -> list[RetrieveResult]:
    """When the results come from more than one engine type, map their vector scores to [0, 1]
    (keyword scores are never changed). With one engine type the results are returned as is."""
    if len({r.engine_type for r in results}) <= 1:
        return list(results)
    out = []
    for r in results:
        if r.retriever_type != "vector":
            out.append(r)
            continue
        hits = [rescored(h, normalize_vector_score(r.engine_type, h.score)) for h in r.hits]
        out.append(replace(r, hits=hits))
    return out
