"""Result deduplication used by the merge stage (spec §6.5, §6.6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from rag_lab.searchutil.text import (
    build_content_signature,
    is_content_contained,
    normalize_content,
    tokenize_simple,
    utf8_len,
)
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
    byte_lens = [utf8_len(s) for s in norms]
    removed = [False] * n
    token_cache: dict[int, set[str]] = {}

    def tokens(k: int) -> set[str]:
        if k not in token_cache:
            token_cache[k] = tokenize_simple(items[k].content)
        return token_cache[k]

    def overlap_ratio(a: int, b: int) -> float:
        # content_overlap_ratio(items[a].content, items[b].content), with cached token sets.
        ta, tb = tokens(a), tokens(b)
        if not ta or not tb:
            return 0.0
        small, large = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
        return len(small & large) / len(small)

    for i in range(n):
        if removed[i]:
            continue
        for j in range(i + 1, n):
            if removed[j]:
                continue
            short, long_ = (j, i) if byte_lens[i] > byte_lens[j] else (i, j)
            contained = is_content_contained(norms[short], norms[long_])
            if not contained and overlap_ratio(short, long_) < threshold:
                continue
            victim = long_ if items[short].score > items[long_].score else short
            removed[victim] = True
    return [r for r, gone in zip(items, removed) if not gone]
