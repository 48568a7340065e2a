"""Result deduplication used by the merge stage (spec §6.5, §6.6)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol, TypeVar

import numpy as np

from rag_lab.searchutil.text import (
    build_content_signature,
    contains_han,
    normalize_content,
    utf8_len,
)
from rag_lab.searchutil.tokens import cached_token_ids, cached_token_set, intersection_counts
from rag_lab.types.params import PipelineParams

__all__ = ["remove_duplicate_results", "remove_partial_overlaps"]


class _Passage(Protocol):
    """What deduplication reads of a result."""

    @property
    def id(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def score(self) -> float: ...


T = TypeVar("T", bound=_Passage)

#: contains_han of normalised texts (pure; the same contents come back question after question)
_has_han = lru_cache(maxsize=32768)(contains_han)


def remove_duplicate_results(results: Sequence[T]) -> list[T]:
    """Drop repeated IDs, then repeated non-empty content signatures, keeping the first (§6.5).

    Blank content is never deduplicated by signature.
    """
    seen_ids: set[str] = set()
    seen_sigs: set[str] = set()
    out: list[T] = []
    for r in results:
        rid = r.id
        if rid in seen_ids:
            continue
        sig = build_content_signature(r.content)
        if sig and sig in seen_sigs:
            continue
        if sig:
            seen_sigs.add(sig)
        seen_ids.add(rid)
        out.append(r)
    return out


def remove_partial_overlaps(
    results: Sequence[T], threshold: float = PipelineParams.model_fields["overlap_threshold"].default
) -> list[T]:
    """Drop results contained in, or mostly overlapping, another result (§6.6).

    For each pair (i, j>i) the shorter normalised text (by UTF-8 bytes; ``i`` on a tie) is
    *short*. When it is contained in the longer one, or its token overlap ratio is
    ``>= threshold``, the short one is removed unless its score is strictly higher, in which
    case the long one is. Upstream quirk kept: ``i`` goes on knocking out later items after it
    was itself removed.
    """
    n = len(results)
    if n <= 1:
        return list(results)
    items: list[T] = list(results)
    contents = [r.content for r in items]
    norms = [normalize_content(c) for c in contents]
    if n <= SMALL_N:
        return _remove_small(items, contents, norms, threshold)
    byte_lens = np.array([utf8_len(s) for s in norms], dtype=np.int64)
    ids = [cached_token_ids(c) for c in contents]
    sizes = np.array([a.size for a in ids], dtype=np.int64)
    # |tokens_a ∩ tokens_b| for every pair, from the cached token ids
    common = intersection_counts(ids)
    # content_overlap_ratio(short, long) for every pair: |a ∩ b| / min(|a|, |b|), 0 when one is empty
    small = np.minimum(sizes[:, None], sizes[None, :])
    ratio = np.divide(common, small, out=np.zeros((n, n), dtype=np.float64), where=small > 0)
    # the shorter text of each pair (i, j>i): j when strictly shorter by UTF-8 bytes, else i
    j_short = byte_lens[None, :] < byte_lens[:, None]
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    # pairs whose overlap already reaches the threshold; the others need the containment test
    hit = upper & (ratio >= threshold)
    # containment: the normalised short text is a run of the long one's fields (its first and
    # last field possibly cut), so every token of it but those two is a token of the long one
    # (tokenize_simple keeps some of the same fields). Only pairs sharing that many tokens can
    # hold one in the other; jieba segments Han text by context, so such pairs are all tested.
    pos = np.arange(n)
    short_of = np.where(j_short, pos[None, :], pos[:, None])
    maybe = upper & ~hit & (common >= sizes[short_of] - 2)
    han = np.array([not t.isascii() and _has_han(t) for t in norms], dtype=bool)
    if han.any():
        maybe |= upper & ~hit & (han[:, None] | han[None, :])
    for i, j in zip(*np.nonzero(maybe)):
        short, long_ = (j, i) if j_short[i, j] else (i, j)
        # is_content_contained(norms[short], norms[long_]); byte_lens[short] <= byte_lens[long_] by construction
        short_n = norms[short]
        if short_n and short_n in norms[long_]:
            hit[i, j] = True
    if not hit.any():
        return items
    hi, hj = np.nonzero(hit)
    pairs = [((j, i) if j_short[i, j] else (i, j), i, j) for i, j in zip(hi.tolist(), hj.tolist())]
    return _drop(items, pairs)


#: at most this many results, the pairs are tested one by one on the cached token sets (a few
#: dozen set intersections cost less than the array set-up); above, all pairs at once as arrays
SMALL_N = 12


def _remove_small(items: list[T], contents: list[str], norms: list[str], threshold: float) -> list[T]:
    """:func:`remove_partial_overlaps` pair by pair (same decisions: ``|a ∩ b| / min(|a|, |b|)``
    in doubles, the same containment pre-test and test)."""
    n = len(items)
    sets = [cached_token_set(c) for c in contents]
    sizes = [len(t) for t in sets]
    byte_lens = [utf8_len(t) for t in norms]
    han: list[bool] | None = None
    pairs: list[tuple[tuple[int, int], int, int]] = []
    for i in range(n):
        a, size_i, bytes_i = sets[i], sizes[i], byte_lens[i]
        for j in range(i + 1, n):
            common = len(a & sets[j]) if size_i and sizes[j] else 0
            small = min(size_i, sizes[j])
            short, long_ = (j, i) if byte_lens[j] < bytes_i else (i, j)
            if (common / small if small > 0 else 0.0) >= threshold:  # 0 when one is empty
                pairs.append(((short, long_), i, j))
                continue
            if common < sizes[short] - 2:  # not every token of the short one (but its ends) is shared
                if han is None:
                    han = [not t.isascii() and _has_han(t) for t in norms]
                if not (han[i] or han[j]):
                    continue
            short_n = norms[short]
            if short_n and short_n in norms[long_]:
                pairs.append(((short, long_), i, j))
    return _drop(items, pairs) if pairs else items


def _drop(items: list[T], pairs: list[tuple[tuple[int, int], int, int]]) -> list[T]:
    """Apply the hit pairs ``((short, long), i, j)``, in (i, then j > i) order: the short one goes
    unless its score is strictly higher; a row is skipped when its ``i`` was removed before the
    row began (it goes on within its own row)."""
    scores = [r.score for r in items]
    removed = [False] * len(items)
    row, skip = -1, False
    for (short, long_), i, j in pairs:
        if i != row:
            row, skip = i, removed[i]
        if skip or removed[j]:
            continue
        removed[long_ if scores[short] > scores[long_] else short] = True
    return [r for r, gone in zip(items, removed) if not gone]
