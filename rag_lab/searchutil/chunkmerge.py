"""Joining chunk texts with overlap detection (spec §6.12–§6.14).

All lengths are in runes (Python code points). The merge stage uses ``join_chunk_content`` and
``append_with_exact_overlap``/``append_with_overlap``; document reconstruction uses
``merge_text_chunks``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rag_lab.types.params import PipelineParams

__all__ = [
    "MIN_OVERLAP",
    "SPAN",
    "HEAD_SLACK",
    "contains_chunk_content",
    "join_chunk_content",
    "longest_overlap",
    "append_with_exact_overlap",
    "append_with_overlap",
    "merge_text_chunks",
]

_P = PipelineParams.model_fields
#: Shortest overlap (runes) joined without a separator; shorter suffixes match by accident.
MIN_OVERLAP: int = _P["join_min_overlap"].default
#: Longest overlap (runes) searched, and the floor of ``append_with_overlap``'s search cap.
SPAN: int = _P["join_span"].default
#: Floor of the synthetic prefix ``append_with_overlap`` may skip in ``next``.
HEAD_SLACK: int = _P["append_head_slack"].default


def contains_chunk_content(container: str, contained: str, min_overlap: int = MIN_OVERLAP) -> bool:
    """Equal strings, or ``contained`` (at least ``min_overlap`` runes) inside ``container``."""
    if not container or not contained:
        return False
    if container == contained:
        return True
    return len(contained) >= min_overlap and contained in container


def join_chunk_content(acc: str, next: str, sep: str, min_overlap: int = MIN_OVERLAP, span: int = SPAN) -> str:
    """Join two chunk texts: containment wins, then the longest suffix/prefix overlap of
    ``min_overlap``..``span`` runes is merged, otherwise ``sep`` goes between (§6.12)."""
    if not acc:
        return next
    if not next:
        return acc
    if contains_chunk_content(acc, next, min_overlap):
        return acc
    if contains_chunk_content(next, acc, min_overlap):
        return next
    ov = longest_overlap(acc, next, max(min_overlap, 1), min(len(acc), len(next), span))
    if ov:
        return acc + next[ov:]
    return acc + sep + next


def longest_overlap(acc: str, next: str, min_overlap: int, max_overlap: int) -> int:
    """The largest ``ov`` in ``min_overlap..max_overlap`` with ``acc.endswith(next[:ov])``, else 0.

    Only the places where ``next``'s first ``min_overlap`` runes occur in ``acc``'s tail can
    start an overlap; the first one that matches to the end gives the longest."""
    if max_overlap < min_overlap or min_overlap <= 0:
        return 0
    tail = acc[len(acc) - max_overlap :]
    head = next[:min_overlap]
    p = tail.find(head)
    while p != -1:
        if next.startswith(tail[p:]):
            return len(tail) - p
        p = tail.find(head, p + 1)
    return 0


def append_with_exact_overlap(acc: str, next: str, overlap: int) -> tuple[str, bool]:
    """Append ``next`` when exactly ``overlap`` runes overlap; ``("", False)`` otherwise (§6.13)."""
    if not acc:
        return next, True
    if not next:
        return acc, True
    if overlap < 0:
        return "", False
    if overlap == 0:
        return acc + next, True
    if overlap > len(acc) or overlap > len(next):
        return "", False
    if acc[len(acc) - overlap :] != next[:overlap]:
        return "", False
    return acc + next[overlap:], True


def append_with_overlap(
    acc: str,
    next: str,
    position_overlap: int,
    min_overlap: int = MIN_OVERLAP,
    span: int = SPAN,
    head_slack: int = HEAD_SLACK,
) -> str:
    """Append ``next`` after removing the overlap found by text (§6.14).

    ``position_overlap`` (from offsets) only sizes the search: suffixes of ``acc`` from
    ``min(runes, max(3*po, span))`` down to ``min_overlap`` runes are looked up in ``next``
    at a start position ``<= max(2*po, 320)``, which skips synthetic prefixes such as a
    repeated table header.
    """
    if not acc:
        return next
    if not next:
        return acc
    if position_overlap <= 0:
        return acc + next
    max_k = min(len(acc), len(next), max(3 * position_overlap, span))
    head_slack = max(2 * position_overlap, head_slack)
    for k in range(max_k, min_overlap - 1, -1):
        if k <= 0:
            break
        needle = acc[len(acc) - k :]
        pos = next.find(needle, 0, min(len(next), head_slack + k))
        if pos >= 0:
            return acc + next[pos + k :]
    return acc + next


class _TextChunk(Protocol):
    """What :func:`merge_text_chunks` reads of a chunk (a :class:`~rag_lab.knowledge.models.Chunk`)."""

    @property
    def content(self) -> str: ...

    @property
    def start_at(self) -> int: ...

    @property
    def end_at(self) -> int: ...

    @property
    def chunk_index(self) -> int: ...


def merge_text_chunks(chunks: Iterable[_TextChunk | None], gap_sep: str) -> str:
    """Rebuild a document text from chunks with ``content``, ``start_at``, ``end_at`` and
    ``chunk_index`` (§6.14): sort by (start_at, chunk_index), join gaps with ``gap_sep``,
    merge overlaps with ``append_with_overlap`` and skip covered chunks."""
    ordered = sorted((c for c in chunks if c is not None), key=lambda c: (c.start_at, c.chunk_index))
    merged = ""
    merged_end = -1
    for c in ordered:
        content = c.content or ""
        if not content:
            continue
        if not merged:
            merged = content
            if c.end_at > 0:
                merged_end = c.end_at
            continue
        if c.start_at > merged_end or c.end_at == 0:
            merged += gap_sep + content
            if c.end_at > 0:
                merged_end = c.end_at
            continue
        if c.end_at > merged_end:
            merged = append_with_overlap(merged, content, merged_end - c.start_at)
            merged_end = c.end_at
    return merged
