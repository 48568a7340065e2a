"""Split a document's text into chunks (plain or parent/child).

Spans are measured in code points (Python ``str`` indices), so for every chunk
``chunk.content == text[chunk.start_at:chunk.end_at]``. A chunk ends at the best boundary inside
its window, in this order of preference: paragraph break (a blank line), sentence end (English
``. ! ? ; …`` followed by whitespace, Chinese ``。！？；`` with or without whitespace), line break,
any whitespace; a hard cut at ``chunk_size`` is the last resort. A boundary is only used when it
leaves the chunk at least half of ``chunk_size`` long, so a stray early break does not produce tiny
chunks. With an overlap, the next chunk starts ``chunk_overlap`` code points before the previous
end, moved forward to the next word start when that stays inside the overlap.

Invariants (property-tested): chunks are non-blank, at most ``chunk_size`` long, start at strictly
increasing offsets, overlap their predecessor by at most ``chunk_overlap``, and together contain
every non-whitespace character of the text (only whitespace-only stretches can fall between two
chunks). ``chunk_index`` runs 0..n-1 and ``pre_chunk_id`` / ``next_chunk_id`` link neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rag_lab.knowledge.models import Chunk

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_SENTENCE = re.compile(r"[.!?;…]+[\"'”’)\]]*\s+|[。！？；]+[”’」』）)]*\s*")
_LINE = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")
_BOUNDARIES = (_PARAGRAPH, _SENTENCE, _LINE, _SPACE)


class ChunkingError(ValueError):
    """Invalid chunking settings; the message names the field and value."""


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    chunk_size: int = 512
    chunk_overlap: int = 64
    #: > 0 turns on parent/child mode: parents of this size (stored, never indexed) hold children
    parent_chunk_size: int = 0
    parent_chunk_overlap: int = 0

    def validate(self) -> ChunkingConfig:
        _check_sizes("chunk_size", self.chunk_size, "chunk_overlap", self.chunk_overlap)
        if self.parent_chunk_size:
            _check_sizes("parent_chunk_size", self.parent_chunk_size, "parent_chunk_overlap", self.parent_chunk_overlap)
            if self.parent_chunk_size <= self.chunk_size:
                raise ChunkingError(
                    f"parent_chunk_size={self.parent_chunk_size} must be larger than chunk_size={self.chunk_size}"
                )
        elif self.parent_chunk_size < 0:
            raise ChunkingError(f"parent_chunk_size={self.parent_chunk_size} must be >= 0")
        return self


def _check_sizes(size_name: str, size: int, overlap_name: str, overlap: int) -> None:
    if not isinstance(size, int) or size <= 0:
        raise ChunkingError(f"{size_name}={size!r} must be a positive integer")
    if not isinstance(overlap, int) or overlap < 0 or overlap >= size:
        raise ChunkingError(f"{overlap_name}={overlap!r} must be an integer in [0, {size_name}={size})")


def _best_break(text: str, start: int, lo: int, hi: int) -> int | None:
    """The end of the last boundary match ending in [lo, hi], by boundary preference."""
    for pattern in _BOUNDARIES:
        best = None
        for m in pattern.finditer(text, start, hi):
            if lo <= m.end() <= hi and m.end() > start:
                best = m.end()
        if best is not None:
            return best
    return None


def _latin_word_char(ch: str) -> bool:
    return ch.isalnum() and ord(ch) < 0x2E80  # letters/digits of alphabetic scripts, not CJK


def _word_start(text: str, pos: int, end: int) -> int:
    """Where the next chunk starts, given the overlap start ``pos`` and the previous end.

    Whitespace at ``pos`` is skipped; a ``pos`` inside a word of an alphabetic script moves to the
    next word start, or to ``end`` (no overlap) when that word runs up to ``end``. CJK text has no
    spaces, so there ``pos`` is kept as is.
    """
    if text[pos].isspace():
        m = _SPACE.match(text, pos, end)
        return m.end() if m and m.end() < end else end
    if pos > 0 and _latin_word_char(text[pos - 1]) and _latin_word_char(text[pos]):
        m = _SPACE.search(text, pos, end)
        return m.end() if m and m.end() < end else end
    return pos


def split_spans(text: str, chunk_size: int, chunk_overlap: int = 0) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` code-point spans of the chunks of ``text`` (see module docstring)."""
    _check_sizes("chunk_size", chunk_size, "chunk_overlap", chunk_overlap)
    if not text or text.isspace():
        return []
    spans, _, _ = _spans_from(text, chunk_size, chunk_overlap, 0, 0, final=True)
    return spans


def _spans_from(
    text: str, chunk_size: int, chunk_overlap: int, start: int, prev_end: int, final: bool
) -> tuple[list[tuple[int, int]], int, int]:
    """The span loop from ``start`` (``prev_end``: the previous chunk's end). With ``final=False``
    it stops before any decision that could depend on text past the end of ``text`` (more may
    follow) and returns where to resume: ``(spans, start, prev_end)``."""
    n = len(text)
    spans: list[tuple[int, int]] = []
    min_len = max(1, chunk_size // 2)
    while start < n:
        # the window must hold chunk_size + 1 code points (a boundary at the limit, the next
        # word start), else wait for more text
        if not final and n - start <= chunk_size + 1:
            return spans, start, prev_end
        if n - start <= chunk_size:
            end = n
        else:
            limit = start + chunk_size
            # every chunk must reach past its predecessor, or it would only repeat overlap
            lo = max(start + min_len, prev_end + 1)
            end = _best_break(text, start, lo, limit) or limit
        if not text[start:end].isspace():
            spans.append((start, end))
        if end >= n:
            return spans, n, end
        prev_end = end
        nxt = max(end - chunk_overlap, start + 1) if chunk_overlap else end
        start = _word_start(text, nxt, end) if nxt < end else end
    return spans, start, prev_end


def iter_spans(pieces: Iterable[str], chunk_size: int, chunk_overlap: int = 0) -> Iterator[tuple[int, int, str]]:
    """:func:`split_spans` over text that arrives in pieces (a big file read block by block):
    yields ``(start, end, content)`` with offsets into the whole text, exactly the spans
    ``split_spans("".join(pieces), ...)`` gives, holding only a window of the text in memory."""
    _check_sizes("chunk_size", chunk_size, "chunk_overlap", chunk_overlap)
    buf, base = "", 0  # buf holds the text from absolute offset ``base``
    start = prev_end = 0  # absolute
    for piece in pieces:
        if not piece:
            continue
        buf += piece
        spans, start_rel, prev_rel = _spans_from(buf, chunk_size, chunk_overlap, start - base, prev_end - base, False)
        for s, e in spans:
            yield base + s, base + e, buf[s:e]
        start, prev_end = base + start_rel, base + prev_rel
        # later spans start at ``start`` or after; keep one code point before it
        cut = start - base - 1
        if cut > 0:
            buf, base = buf[cut:], base + cut
    if start < base + len(buf):
        spans, _, _ = _spans_from(buf, chunk_size, chunk_overlap, start - base, prev_end - base, True)
        for s, e in spans:
            yield base + s, base + e, buf[s:e]


def chunk_text(
    text: str,
    *,
    knowledge_id: str,
    knowledge_base_id: str,
    config: ChunkingConfig | None = None,
    id_prefix: str | None = None,
    tag_id: str = "",
) -> list[Chunk]:
    """Chunks of one document. Plain mode: ``text`` chunks. Parent/child mode: ``parent_text``
    chunks (ids ``<prefix>#p<i>``) followed by their ``text`` children (ids ``<prefix>#c<i>``,
    ``parent_chunk_id`` set). ``id_prefix`` defaults to ``knowledge_id``; pass a KB-qualified
    prefix when chunk ids must be unique across KBs."""
    cfg = (config or ChunkingConfig()).validate()
    prefix = knowledge_id if id_prefix is None else id_prefix

    def make(span: tuple[int, int], idx: int, ctype: str, cid: str, parent: str = "") -> Chunk:
        s, e = span
        return Chunk(
            id=cid,
            knowledge_id=knowledge_id,
            knowledge_base_id=knowledge_base_id,
            content=text[s:e],
            chunk_index=idx,
            chunk_type=ctype,
            start_at=s,
            end_at=e,
            parent_chunk_id=parent,
            tag_id=tag_id,
        )

    parents: list[Chunk] = []
    children: list[Chunk] = []
    if cfg.parent_chunk_size > 0:
        for pi, (ps, pe) in enumerate(split_spans(text, cfg.parent_chunk_size, cfg.parent_chunk_overlap)):
            parent = make((ps, pe), pi, "parent_text", f"{prefix}#p{pi}")
            parents.append(parent)
            for cs, ce in split_spans(text[ps:pe], cfg.chunk_size, cfg.chunk_overlap):
                ci = len(children)
                children.append(make((ps + cs, ps + ce), ci, "text", f"{prefix}#c{ci}", parent.id))
    else:
        for ci, span in enumerate(split_spans(text, cfg.chunk_size, cfg.chunk_overlap)):
            children.append(make(span, ci, "text", f"{prefix}#c{ci}"))
    _link(parents)
    _link(children)
    return parents + children


def _link(chunks: list[Chunk]) -> None:
    for prev, nxt in zip(chunks, chunks[1:]):
        prev.next_chunk_id = nxt.id
        nxt.pre_chunk_id = prev.id
