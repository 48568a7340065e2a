"""Token sets computed once per text (spec §6.1 ``tokenize_simple``), cached by content.

MMR tokenises each candidate's enriched passage, partial-overlap removal each merged content, and
the same chunks come back question after question: tokenising them again is most of the
post-retrieval time. :func:`cached_token_set` returns ``frozenset(tokenize_simple(text))`` and
remembers it under the exact text, so a text is tokenised once per process.

The cache is keyed by the text itself (an exact match, no collision is possible) and versioned
with the tokenizer: :data:`TOKENIZER_VERSION` names the tokenisation rules and jieba's version,
and :func:`token_key` (a BLAKE2b digest of the version and the text) is the key under which a
token set may be stored on disk. Only the joined text's own set is ever returned: jieba's tokens
of a joined text are not the union of its parts' tokens, so a merged content is tokenised as the
string it is.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from rag_lab.searchutil.text import tokenize_simple

__all__ = [
    "TOKENIZER_VERSION",
    "TokenSetCache",
    "cached_token_ids",
    "cached_token_set",
    "cached_token_sets",
    "intersection_counts",
    "intersection_row_counter",
    "token_cache",
    "token_key",
]

#: rules of ``tokenize_simple`` (bump when they change) and the jieba release that segments Han text
_RULES_VERSION = "tokenize_simple/1"


def _jieba_version() -> str:
    try:
        from importlib.metadata import version

        return version("jieba")
    except Exception:  # pragma: no cover - jieba is a dependency
        return "none"


TOKENIZER_VERSION = f"{_RULES_VERSION}+jieba-{_jieba_version()}"


def token_key(text: str) -> str:
    """Content-hash key of ``text``'s token set: BLAKE2b-128 of the tokenizer version and the text."""
    h = hashlib.blake2b(digest_size=16)
    h.update(TOKENIZER_VERSION.encode("utf-8"))
    h.update(b"\x00")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class TokenSetCache:
    """``text → frozenset(tokenize_simple(text))`` for up to ``max_entries`` texts (oldest dropped
    first). Thread-safe; hits and misses are counted.

    :meth:`ids` gives the same set as a sorted ``int32`` array of token ids (ids are interned once
    per cache, never reused), which is what the vectorised MMR counts intersections with.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        if max_entries < 1:
            raise ValueError(f"TokenSetCache: max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self.version = TOKENIZER_VERSION
        self._sets: dict[str, frozenset[str]] = {}
        self._ids: dict[str, np.ndarray] = {}
        self.vocabulary: dict[str, int] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._sets)

    def __contains__(self, text: object) -> bool:
        return text in self._sets

    def get(self, text: str) -> frozenset[str]:
        """The token set of ``text`` (computed on first sight)."""
        found = self._sets.get(text)
        if found is not None:
            self.hits += 1
            return found
        tokens = frozenset(tokenize_simple(text))
        with self._lock:
            self.misses += 1
            if len(self._sets) >= self.max_entries:
                for old in list(self._sets)[: max(1, self.max_entries // 10)]:
                    del self._sets[old]
                    self._ids.pop(old, None)
            self._sets[text] = tokens
        return tokens

    def ids(self, text: str) -> np.ndarray:
        """The token set of ``text`` as sorted token ids (read-only ``int32`` array)."""
        found = self._ids.get(text)
        if found is not None:
            return found
        tokens = self.get(text)
        with self._lock:
            vocab = self.vocabulary
            arr = np.array(sorted(vocab.setdefault(t, len(vocab)) for t in tokens), dtype=np.int32)
            arr.flags.writeable = False
            if text in self._sets:
                self._ids[text] = arr
        return arr

    def get_many(self, texts: Iterable[str]) -> list[frozenset[str]]:
        get = self.get
        return [get(t) for t in texts]

    def items(self) -> list[tuple[str, frozenset[str]]]:
        """A copy of the cached (text, token set) pairs."""
        with self._lock:
            return list(self._sets.items())

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self._ids.clear()
            self.hits = self.misses = 0


#: the process-wide cache the rerank and merge stages share
token_cache = TokenSetCache()


def cached_token_set(text: str) -> frozenset[str]:
    """``frozenset(tokenize_simple(text))`` from the process-wide cache."""
    return token_cache.get(text)


def cached_token_ids(text: str) -> np.ndarray:
    """:meth:`TokenSetCache.ids` of the process-wide cache."""
    return token_cache.ids(text)


def cached_token_sets(texts: Iterable[str]) -> list[frozenset[str]]:
    """:func:`cached_token_set` of each text."""
    return token_cache.get_many(texts)


def intersection_counts(ids: Sequence[np.ndarray]) -> np.ndarray:
    """``counts[i, j] = |tokens_i ∩ tokens_j|`` for token-id arrays (sorted, unique), ``int32``.

    Few texts (the merge stage's ~30): every pair at once from bit sets of the tokens they share
    (a popcount of their AND); more: one :func:`intersection_row_counter` row per text."""
    n = len(ids)
    out = np.zeros((n, n), dtype=np.int32)
    if not n:
        return out
    sizes = _sizes(ids)
    ids, tok = _local_ids(ids, sizes)
    if tok.size:
        seen = np.bincount(tok)
        shared = seen[tok] > 1
        common = np.flatnonzero(seen > 1)  # the tokens two texts or more hold: one bit each
        words = (common.size + 63) // 64
        if not words:  # no token in two texts
            pass
        elif n * n * words <= _PAIRWISE_MAX:
            bit_of = np.empty(seen.size, dtype=np.intp)
            bit_of[common] = np.arange(common.size)
            bits = np.zeros((n, words * 64), dtype=bool)
            bits[np.repeat(np.arange(n), sizes)[shared], bit_of[tok[shared]]] = True
            packed = np.packbits(bits, axis=1).view(np.uint64)
            out = np.bitwise_count(packed[:, None, 0] & packed[None, :, 0]).astype(np.int32)
            for w in range(1, words):  # word by word: cheaper than one sum over a short last axis
                out += np.bitwise_count(packed[:, None, w] & packed[None, :, w])
        else:
            row = intersection_row_counter(ids)
            for i in range(n):
                out[i] = row(i)
    np.fill_diagonal(out, sizes)
    return out


#: largest n·n·(64-bit words of shared tokens) counted pairwise at once (~1 MB of temporaries)
_PAIRWISE_MAX = 131_072


#: largest (shared tokens x candidates) 0 / 1 table the row counter builds, in bytes; above it (a
#: few thousand candidates) each row is counted from a mark of the candidate's tokens instead
_TABLE_MAX = 1 << 25


def intersection_row_counter(ids: Sequence[np.ndarray]) -> Callable[[int], np.ndarray]:
    """``row(c)[i] = |tokens_c ∩ tokens_i|`` (int64 array) for every candidate ``i != c``. Only the
    tokens two candidates share can count. Within :data:`_TABLE_MAX`: a 0 / 1 table of which
    candidate holds which shared token, whose rows for ``c``'s shared tokens are summed; above it:
    the shared tokens, flattened candidate after candidate, gathered against a mark of ``c``'s
    tokens and summed per candidate (memory by the tokens alone)."""
    n = len(ids)
    sizes = _sizes(ids)
    ids, tok = _local_ids(ids, sizes)
    if not tok.size:
        return lambda c: np.zeros(n, dtype=np.int64)
    seen = np.bincount(tok)
    shared = seen[tok] > 1
    common = np.flatnonzero(seen > 1)
    holder = np.repeat(np.arange(n), sizes)[shared]
    if common.size * n > _TABLE_MAX:
        return _marked_rows(ids, tok[shared], np.bincount(holder, minlength=n), seen.size)
    column = np.empty(seen.size, dtype=np.intp)
    column[common] = np.arange(common.size)
    kept = column[tok[shared]]  # each candidate's shared tokens, candidate after candidate
    held = np.zeros((common.size, n), dtype=np.uint8)
    held[kept, holder] = 1
    bounds = [0, *np.cumsum(np.bincount(holder, minlength=n)).tolist()]
    return lambda c: held[kept[bounds[c] : bounds[c + 1]]].sum(axis=0, dtype=np.int64)


def _marked_rows(
    ids: Sequence[np.ndarray], kept: np.ndarray, per_row: np.ndarray, vocabulary: int
) -> Callable[[int], np.ndarray]:
    """:func:`intersection_row_counter`'s rows without its table: ``kept`` holds each candidate's
    shared tokens (``per_row`` of them), candidate after candidate."""
    flat = np.append(kept, vocabulary)  # never marked: every segment's offset is in range
    offsets = np.zeros(per_row.size, dtype=np.intp)
    np.cumsum(per_row[:-1], out=offsets[1:])
    empty = per_row == 0  # reduceat gives an empty segment its next element: zeroed
    mark = np.zeros(vocabulary + 1, dtype=bool)

    def row(c: int) -> np.ndarray:
        mark[ids[c]] = True
        counts = np.add.reduceat(mark.take(flat), offsets).astype(np.int64)
        mark[ids[c]] = False
        counts[empty] = 0
        return counts

    return row


#: token ids are renumbered before counting when the largest is above this and 64x the tokens at
#: hand: the counts' arrays are sized by the largest id, and a long-running process' vocabulary
#: only grows (``benchmarks/post_retrieval.py`` times 30 texts with ids near 2 million both ways).
_LOCAL_IDS_ABOVE = 1 << 16
_LOCAL_IDS_FACTOR = 64


def _local_ids(ids: Sequence[np.ndarray], sizes: np.ndarray) -> tuple[Sequence[np.ndarray], np.ndarray]:
    """``(ids, their concatenation)``, renumbered densely (order kept, so still sorted and unique
    per array) when the largest id is far above the number of tokens; intersections are unchanged."""
    tok = np.concatenate(ids) if len(ids) else np.empty(0, dtype=np.int32)
    if not tok.size or int(tok.max()) < max(_LOCAL_IDS_ABOVE, _LOCAL_IDS_FACTOR * tok.size):
        return ids, tok
    _, local = np.unique(tok, return_inverse=True)
    local = local.astype(np.int32)
    return np.split(local, np.cumsum(sizes)[:-1]), local


def _sizes(ids: Sequence[np.ndarray]) -> np.ndarray:
    return np.array([a.size for a in ids], dtype=np.intp)
