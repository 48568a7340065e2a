"""Result deduplication used by the merge stage (spec §6.5, §6.6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from rag_lab.searchutil.text import (
    build_content_signature,
    normalize_content,
    utf8_len,
)
from rag_lab.searchutil.tokens import cached_token_ids, intersection_counts
from rag_lab.types.params import PipelineParams

__all__ = ["remove_duplicate_results", "remove_partial_overlaps"]

T = TypeVar("T")


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
    norms = [normalize_content(r.content) for r in items]
    byte_lens = np.fromiter((utf8_len(s) for s in norms), dtype=np.int64, count=n)
    ids = [cached_token_ids(r.content) for r in items]
    sizes = np.fromiter((a.size for a in ids), dtype=np.int64, count=n)
    # |tokens_a ∩ tokens_b| for every pair, from the cached token ids (one vector op per row)
    common = intersection_counts(ids)
    # content_overlap_ratio(short, long) for every pair: |a ∩ b| / min(|a|, |b|), 0 when one is empty
    small = np.minimum(sizes[:, None], sizes[None, :])
    ratio = np.divide(common, small, out=np.zeros((n, n), dtype=np.float64), where=small > 0)
    # the shorter text of each pair (i, j>i): j when strictly shorter by UTF-8 bytes, else i
    j_short = byte_lens[None, :] < byte_lens[:, None]
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    # pairs whose overlap already reaches the threshold; the others need the containment test
    hit = upper & (ratio >= threshold)
    for i, j in zip(*np.nonzero(upper & ~hit)):
        short, long_ = (j, i) if j_short[i, j] else (i, j)
        short_n = norms[short]
        # is_content_contained(norms[short], norms[long_]); byte_lens[short] <= byte_lens[long_] by construction
        if short_n and short_n in norms[long_]:
            hit[i, j] = True
    scores = [r.score for r in items]
    removed = [False] * n
    # only hit pairs can remove anything; visited in the reference order (i, then j > i)
    for i, row in enumerate(hit.tolist()):
        if removed[i] or not any(row):
            continue
        for j in range(i + 1, n):
            if not row[j] or removed[j]:
                continue
            short, long_ = (j, i) if j_short[i, j] else (i, j)
            victim = long_ if scores[short] > scores[long_] else short
            removed[victim] = True
    return [r for r, gone in zip(items, removed) if not gone]
