"""Result deduplication used by the merge stage (spec §6.5, §6.6)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np

from rag_lab.searchutil.text import (
    build_content_signature,
    contains_han,
    normalize_content,
    utf8_len,
)
from rag_lab.searchutil.tokens import cached_token_ids, intersection_counts
from rag_lab.types.params import PipelineParams

__all__ = ["remove_duplicate_results", "remove_partial_overlaps"]

T = TypeVar("T")

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
        rid = r.id  # type: ignore[attr-defined]
        if rid in seen_ids:
            continue
        sig = build_content_signature(r.content)  # type: ignore[attr-defined]
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
    items: list[Any] = list(results)
    contents = [r.content for r in items]
    norms = [normalize_content(c) for c in contents]
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
    scores = [r.score for r in items]
    removed = [False] * n
    # only hit pairs can remove anything; visited in the reference order (i, then j > i); a row
    # is skipped when its i was removed before the row began (it goes on within its own row)
    row, skip = -1, False
    hi, hj = np.nonzero(hit)
    for i, j in zip(hi.tolist(), hj.tolist()):
        if i != row:
            row, skip = i, removed[i]
        if skip or removed[j]:
            continue
        short, long_ = (j, i) if j_short[i, j] else (i, j)
        removed[long_ if scores[short] > scores[long_] else short] = True
    return [r for r, gone in zip(items, removed) if not gone]
