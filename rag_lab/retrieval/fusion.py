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
* :func:`fuse_ranked` — the §5.12 dispatcher, as :class:`Ranked`: the fused order of the two
  lists' positions, read as (representative hit, fused score) pairs; :func:`fuse_hits` is its
  list form (copies of the hits with their fused scores), as :func:`weighted_rrf` is the list
  form of :func:`rrf_ranked`.

Each decision is computed once, on what it reads of each hit: ``(chunk id, score, id)``
(:func:`hit_keys`; a retriever's :class:`~rag_lab.retrieval.base.HitRows` hold them as rows), so
the hybrid search makes no hit object for what it fuses, only for what it returns.

Determinism: the reference sorts unstably; here equal scores are ordered by chunk id (then the
entry id), so results never depend on hash or thread order. Inputs are never mutated: hits whose
score changes are copies.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import Any, ParamSpec, overload

from rag_lab.retrieval.base import HitRows, IndexWithScore, RetrieveResult
from rag_lab.types.params import PipelineParams

_DEFAULTS = PipelineParams.model_fields
DEFAULT_RRF_K: int = _DEFAULTS["rrf_k"].default
DEFAULT_VECTOR_WEIGHT: float = _DEFAULTS["rrf_vector_weight"].default
DEFAULT_KEYWORD_WEIGHT: float = _DEFAULTS["rrf_keyword_weight"].default
P = ParamSpec("P")


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


def hit_keys(hits: Sequence[IndexWithScore]) -> Sequence[Sequence[Any]]:
    """What the fusion reads of each hit, ``(chunk id, score, id)`` first: the rows of
    :class:`~rag_lab.retrieval.base.HitRows`, else read from the hits."""
    if isinstance(hits, HitRows):
        return hits.rows
    return list(map(_KEY, hits))


_KEY = attrgetter("chunk_id", "score", "id")


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


class Ranked(Sequence[tuple[IndexWithScore, float]]):
    """A fused list, best first: the positions of its hits in the vector hits, then in the
    keyword hits (``len(vector hits) + i``), and their scores; read as ``(hit, score)`` pairs, a
    hit taken from its list when it is read (so a :class:`~rag_lab.retrieval.base.HitRows`
    makes only the hits read)."""

    __slots__ = ("vector_hits", "keyword_hits", "positions", "scores")

    def __init__(
        self,
        vector_hits: Sequence[IndexWithScore],
        keyword_hits: Sequence[IndexWithScore],
        positions: list[int],
        scores: list[float],
    ) -> None:
        self.vector_hits, self.keyword_hits = vector_hits, keyword_hits
        self.positions, self.scores = positions, scores

    @classmethod
    def of(cls, hits: Sequence[IndexWithScore]) -> Ranked:
        """``hits`` in their order, each with its own score."""
        return cls(hits, (), list(range(len(hits))), [h.score for h in hits])

    def hits(self, stop: int | None = None) -> list[IndexWithScore]:
        """The hits, best first (the first ``stop``)."""
        vec, kw = self.vector_hits, self.keyword_hits
        n = len(vec)
        return [vec[at] if at < n else kw[at - n] for at in self.positions[:stop]]

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> tuple[IndexWithScore, float]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[IndexWithScore, float]]: ...

    def __getitem__(self, i: int | slice) -> tuple[IndexWithScore, float] | list[tuple[IndexWithScore, float]]:
        if isinstance(i, slice):
            kept = Ranked(self.vector_hits, self.keyword_hits, self.positions[i], self.scores[i])
            return list(zip(kept.hits(), kept.scores))
        at, n = self.positions[i], len(self.vector_hits)
        return (self.vector_hits[at] if at < n else self.keyword_hits[at - n]), self.scores[i]

    def __iter__(self) -> Iterator[tuple[IndexWithScore, float]]:
        return zip(self.hits(), self.scores)


def _dedup_order(keys: Sequence[Sequence[Any]]) -> list[int]:
    """Positions of the best-scoring key per chunk id (the first one on equal scores), by score
    descending, then chunk id, then id."""
    best: dict[str, int] = {}
    for i, key in enumerate(keys):
        cur = best.get(key[0])
        if cur is None or key[1] > keys[cur][1]:
            best[key[0]] = i
    return sorted(best.values(), key=lambda i: (-keys[i][1], keys[i][0], keys[i][2]))


def dedup_by_score(hits: Iterable[IndexWithScore]) -> list[IndexWithScore]:
    """Best-scoring hit per ``chunk_id`` (the first one on equal scores), sorted by score
    descending then chunk id. Raw scores are kept."""
    hits = hits if isinstance(hits, Sequence) else list(hits)
    return [hits[i] for i in _dedup_order(hit_keys(hits))]


def rrf_ranked(
    vector_hits: Sequence[IndexWithScore],
    keyword_hits: Sequence[IndexWithScore],
    k: float = DEFAULT_RRF_K,
    vector_weight: float = DEFAULT_VECTOR_WEIGHT,
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
    normalize: bool = False,
) -> Ranked:
    """Raw weighted RRF (spec §5.12) as :class:`Ranked` (``(representative hit, fused score)``,
    best first). The representative hit of a chunk is its best-scoring vector hit if it has one,
    else its first keyword hit (the hit itself, not a copy); the fused score is divided by
    :func:`rrf_max_score` when ``normalize`` (:func:`normalize_rrf_scores` in the same pass)."""
    if k <= 0:
        raise ValueError(f"rrf k={k!r} must be > 0")
    top = _rrf_top(k, vector_weight, keyword_weight) if normalize else None
    vkeys, kkeys = hit_keys(vector_hits), hit_keys(keyword_hits)
    # one pass per list: each chunk's representative (a position) and its term at its first rank
    rep: dict[str, int] = {}
    term_v: dict[str, float] = {}
    for i, key in enumerate(vkeys, 1):
        cid = key[0]
        cur = rep.get(cid)
        if cur is None:
            rep[cid] = i - 1
            term_v[cid] = vector_weight / (k + i)
        elif key[1] > vkeys[cur][1]:
            rep[cid] = i - 1
    n = len(vkeys)
    term_k: dict[str, float] = {}
    for i, key in enumerate(kkeys, 1):
        cid = key[0]
        if cid not in term_k:
            term_k[cid] = keyword_weight / (k + i)
            rep.setdefault(cid, n + i - 1)
    get_v, get_k = term_v.get, term_k.get
    fused = [(-(get_v(cid, 0.0) + get_k(cid, 0.0)), cid) for cid in rep]
    fused.sort()  # by the raw fused score (as normalising afterwards would keep it), then chunk id (unique)
    scores = [-neg for neg, _ in fused]
    return Ranked(
        vector_hits,
        keyword_hits,
        [rep[cid] for _, cid in fused],
        scores if top is None else _normalized(scores, top),
    )


def rrf_max_score(k: float, vector_weight: float, keyword_weight: float) -> float:
    """Best attainable weighted RRF score: rank 1 in both lists."""
    return vector_weight / (k + 1) + keyword_weight / (k + 1)


def normalize_rrf_scores(
    hits: Sequence[IndexWithScore], k: float, vector_weight: float, keyword_weight: float
) -> list[IndexWithScore]:
    """Fused scores divided by :func:`rrf_max_score` (so in [0, 1]); order is unchanged."""
    top = _rrf_top(k, vector_weight, keyword_weight)
    return [rescored(h, score) for h, score in zip(hits, _normalized([h.score for h in hits], top))]


def _normalized(scores: list[float], top: float) -> list[float]:
    return [min(1.0, score / top) for score in scores]


def _rrf_top(k: float, vector_weight: float, keyword_weight: float) -> float:
    """:func:`rrf_max_score`, which must be positive to normalise by."""
    top = rrf_max_score(k, vector_weight, keyword_weight)
    if not top > 0:
        raise ValueError(
            f"cannot normalise RRF scores: weights vector={vector_weight!r} keyword={keyword_weight!r} give a "
            "maximum score of 0"
        )
    return top


def fuse_ranked(
    vector_hits: Sequence[IndexWithScore],
    keyword_hits: Sequence[IndexWithScore],
    k: float = DEFAULT_RRF_K,
    vector_weight: float = DEFAULT_VECTOR_WEIGHT,
    keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
    normalize: bool = True,
) -> Ranked:
    """§5.12 as :class:`Ranked` (``(hit, score)``, best first): one list empty →
    :func:`dedup_by_score` of the other (each hit with its raw score); both non-empty →
    :func:`rrf_ranked`, normalised to [0, 1] unless ``normalize`` is False. No hit is copied."""
    if not keyword_hits or not vector_hits:
        hits = vector_hits or keyword_hits
        keys = hit_keys(hits)
        order = _dedup_order(keys)
        return Ranked(hits, (), order, [keys[i][1] for i in order])
    return rrf_ranked(vector_hits, keyword_hits, k, vector_weight, keyword_weight, normalize=normalize)


def _list_form(ranked: Callable[P, Ranked], name: str, examples: str = "") -> Callable[P, list[IndexWithScore]]:
    """The list form ``name`` of a :class:`Ranked` function: its result as hits (:func:`ranked_hits`)."""

    @functools.wraps(ranked)
    def hits(*args: P.args, **kwargs: P.kwargs) -> list[IndexWithScore]:
        return ranked_hits(ranked(*args, **kwargs))

    hits.__name__ = hits.__qualname__ = name
    hits.__doc__ = f":func:`{ranked.__name__}` as hits (:func:`ranked_hits`).{examples}"
    return hits


weighted_rrf = _list_form(rrf_ranked, "weighted_rrf")
fuse_hits = _list_form(
    fuse_ranked,
    "fuse_hits",
    """

    ``b`` is in both lists, so it leads; ``a`` (vector rank 1) beats ``c`` (keyword rank 2):

    >>> from rag_lab.retrieval.base import IndexWithScore
    >>> def hit(cid, score, match_type):
    ...     return IndexWithScore(cid, "", cid, "doc", "kb", score, match_type)
    >>> fused = fuse_hits([hit("a", 0.9, 0), hit("b", 0.7, 0)], [hit("b", 12.0, 1), hit("c", 8.0, 1)])
    >>> [(h.chunk_id, round(h.score, 4)) for h in fused]
    [('b', 0.9887), ('a', 0.7), ('c', 0.2952)]
    """,
)


def ranked_hits(ranked: Ranked) -> list[IndexWithScore]:
    """The hits of a fused list with their scores (copies: :func:`rescored`)."""
    return list(map(rescored, ranked.hits(), ranked.scores))


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
