"""BM25 keyword index per KB, on bm25s (numpy backend).

Scores are exactly what bm25s returns for the chosen ``method`` (default ``"robertson"``, the
original BM25: ``idf = log((N - df + 0.5) / (df + 0.5))`` clamped at 0, times
``tf / (tf + k1 * (1 - b + b * dl / avgdl))``). That is ``rank_bm25.BM25Okapi(epsilon=0)``'s score
divided by ``k1 + 1``. Documents scoring 0 (no query token, or only tokens present in half the
corpus or more) are not returned.

The keyword threshold is **not** applied here, as in the reference engine (spec §5 "Reference
engine semantics", App. B.19): BM25 scores are unbounded, so a threshold meant for [0, 1] scores
would be meaningless.

The index is rebuilt from the per-chunk token lists whenever chunks are added or removed (cheap at
workbench scale; tokens are kept so only new text is tokenised). Documents are ordered by chunk
id inside bm25s, which makes "ties broken by chunk id" a stable sort. Persisted in ``<dir>/``:
the bm25s files, ``meta.json`` (params, tokenizer identity, chunk ids) and ``tokens.json``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER, Tokenizer

BM25_METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
#: one bm25s load at a time in a process: numpy reads each array's header with ``ast.literal_eval``,
#: and CPython 3.11's AST construction is not safe across threads (two loads at once can fail with
#: "AST constructor recursion depth mismatch", python/cpython#106905)
_BM25_LOAD_LOCK = threading.Lock()


class KeywordIndexError(ValueError):
    """Bad index settings or an unreadable / stale index directory."""


class StaleKeywordIndex(KeywordIndexError):
    """The persisted index was built with another tokenizer; rebuild it from the chunk texts."""


def top_positions(scores: np.ndarray, top_k: int) -> np.ndarray:
    """Positions of the ``top_k`` best scores above 0, score descending, ties by position (the
    index's documents are in chunk-id order): the first ``top_k`` of a stable sort of every
    positive score, found by sorting only the scores from the ``top_k``-th best on (all the
    tied ones included)."""
    cand = np.flatnonzero(scores > 0)
    if cand.size > top_k > 0:
        vals = scores[cand]
        cut = cand.size - top_k
        cand = cand[vals >= np.partition(vals, cut)[cut]]
    return cand[np.argsort(-scores[cand], kind="stable")][: max(top_k, 0)]


class KeywordIndex:
    """``add`` / ``remove_chunks`` / ``search`` over one KB's chunk texts (thread-safe)."""

    META_FILE = "meta.json"
    TOKENS_FILE = "tokens.json"
    BM25_DIR = "bm25s"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "robertson",
        tokenizer: Tokenizer = DEFAULT_TOKENIZER,
        dtype: str = "float64",
    ) -> None:
        if method not in BM25_METHODS:
            raise KeywordIndexError(f"method={method!r} is not one of {BM25_METHODS}")
        if not k1 >= 0:
            raise KeywordIndexError(f"k1={k1!r} must be >= 0")
        if not 0 <= b <= 1:
            raise KeywordIndexError(f"b={b!r} must be in [0, 1]")
        self.path = Path(path) if path is not None else None
        self.k1, self.b, self.method, self.dtype = float(k1), float(b), method, dtype
        self.tokenizer = tokenizer
        self._tokens: dict[str, list[str]] | None = {}
        self._chunk_ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._bm25: Any = None
        self._dirty = False
        self._lock = threading.RLock()
        #: the folder the live files were read from (a version folder, see versioned.py)
        self._data_dir: Path | None = self.path
        #: the on-disk version this index was loaded from or last saved as
        self.version: str | None = None

    @property
    def params(self) -> dict[str, float | str]:
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "dtype": self.dtype,
            "tokenizer": self.tokenizer.identity,
        }

    # -- updates ----------------------------------------------------------------------------
    def _token_map(self) -> dict[str, list[str]]:
        if self._tokens is None:  # loaded index: read tokens lazily, only when updating
            assert self._data_dir is not None
            f = self._data_dir / self.TOKENS_FILE
            try:
                self._tokens = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise KeywordIndexError(f"{f}: cannot read tokens: {exc}") from None
        return self._tokens

    def add(self, chunk_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Index (or re-index) these chunks."""
        if len(chunk_ids) != len(texts):
            raise KeywordIndexError(f"{len(chunk_ids)} chunk ids for {len(texts)} texts")
        toks = [self.tokenizer.tokenize(t) for t in texts]
        with self._lock:
            tm = self._token_map()
            for cid, t in zip(chunk_ids, toks):
                tm[cid] = t
            self._dirty = True

    def remove_chunks(self, chunk_ids: Collection[str]) -> int:
        with self._lock:
            tm = self._token_map()
            n = sum(1 for cid in chunk_ids if tm.pop(cid, None) is not None)
            self._dirty = self._dirty or n > 0
            return n

    def _build(self) -> None:
        """Re-index bm25s from the token lists (documents in chunk-id order)."""
        tm = self._token_map()
        ids = sorted(tm)
        self._chunk_ids = ids
        self._pos = {cid: i for i, cid in enumerate(ids)}
        self._bm25 = None
        if ids:
            import bm25s  # lazy: heavy import

            model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method, backend="numpy", dtype=self.dtype)
            model.index([tm[c] for c in ids], show_progress=False)
            self._bm25 = model
        self._dirty = False

    # -- persistence ------------------------------------------------------------------------
    def save(self, path: str | Path | None = None) -> None:
        """Write the index as a new version of ``path`` and switch to it atomically."""
        from rag_lab.retrieval.versioned import write_version

        p = Path(path) if path is not None else self.path
        if p is None:
            raise KeywordIndexError("KeywordIndex.save: no path given and the index has none")
        with self._lock:
            if self._dirty:
                self._build()
            tokens = self._token_map()

            def write(d: Path) -> None:
                if self._bm25 is not None:
                    self._bm25.save(str(d / self.BM25_DIR), show_progress=False)
                else:
                    (d / self.BM25_DIR).mkdir()
                (d / self.TOKENS_FILE).write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
                meta = dict(self.params, chunk_ids=self._chunk_ids)
                (d / self.META_FILE).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

            legacy = (self.BM25_DIR, self.TOKENS_FILE, self.META_FILE)
            self.version = write_version(p, write, legacy_files=legacy)
            self.path = p
            self._data_dir = p / self.version

    @classmethod
    def exists(cls, path: str | Path) -> bool:
        """Whether ``path`` holds a saved index (versioned or the older flat layout)."""
        from rag_lab.retrieval.versioned import current_dir

        return (current_dir(Path(path))[0] / cls.META_FILE).is_file()

    @classmethod
    def load(cls, path: str | Path, **settings: Any) -> KeywordIndex:
        """Open the index in ``path`` (an absent one is new and empty). Raises
        :class:`StaleKeywordIndex` if it was built with another tokenizer; other changed settings
        (k1, b, method, dtype) just rebuild it from the stored tokens."""
        from rag_lab.retrieval.versioned import current_dir, read_pointer

        for attempt in range(3):
            p, version = current_dir(Path(path))
            try:
                return cls._load_version(Path(path), p, version, settings)
            except StaleKeywordIndex:
                raise
            except KeywordIndexError:  # a version pruned while being read: read the new one
                if attempt == 2 or read_pointer(Path(path)) == version:
                    raise
        raise AssertionError("unreachable")

    @classmethod
    def _load_version(cls, path: Path, p: Path, version: str | None, settings: dict[str, Any]) -> KeywordIndex:
        idx = cls(path, **settings)
        idx.version = version
        idx._data_dir = p
        meta_file = p / cls.META_FILE
        if not meta_file.exists():
            if version is not None:
                raise KeywordIndexError(f"{p}: version {version} has no {cls.META_FILE} (removed while being read)")
            return idx
        try:
            meta = json.loads(meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise KeywordIndexError(f"{meta_file}: cannot read keyword index metadata: {exc}") from None
        if meta.get("tokenizer") != idx.tokenizer.identity:
            raise StaleKeywordIndex(
                f"{p}: built with tokenizer {meta.get('tokenizer')!r}, current is {idx.tokenizer.identity!r}"
            )
        idx._tokens = None
        if any(meta.get(k) != v for k, v in idx.params.items()):
            with idx._lock:
                idx._build()
            return idx
        idx._chunk_ids = list(meta["chunk_ids"])
        idx._pos = {cid: i for i, cid in enumerate(idx._chunk_ids)}
        if idx._chunk_ids:
            import bm25s

            try:
                with _BM25_LOAD_LOCK:
                    idx._bm25 = bm25s.BM25.load(str(p / cls.BM25_DIR), show_progress=False)
            except Exception as exc:
                raise KeywordIndexError(f"{p / cls.BM25_DIR}: cannot load the bm25s index: {exc}") from None
            if idx._bm25.scores["num_docs"] != len(idx._chunk_ids):
                raise KeywordIndexError(
                    f"{p}: bm25s holds {idx._bm25.scores['num_docs']} documents but meta.json lists "
                    f"{len(idx._chunk_ids)} chunk ids"
                )
        return idx

    # -- queries ----------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            if self._dirty:
                self._build()
            return len(self._chunk_ids)

    def chunk_ids(self) -> list[str]:
        with self._lock:
            if self._dirty:
                self._build()
            return list(self._chunk_ids)

    def scores(self, query: str | Sequence[str]) -> dict[str, float]:
        """Score of every indexed chunk (0 included) for a query text or token list."""
        ids, _, arr = self._score_array(query)
        return {cid: float(s) for cid, s in zip(ids, arr)}

    def _score_array(self, query: str | Sequence[str]) -> tuple[list[str], dict[str, int], np.ndarray]:
        """(chunk ids, chunk id → position, scores) from one consistent snapshot of the index."""
        tokens = self.tokenizer.tokenize(query) if isinstance(query, str) else list(query)
        with self._lock:
            if self._dirty:
                self._build()
            model, ids, pos = self._bm25, self._chunk_ids, self._pos
        if model is None:
            return ids, pos, np.zeros(0)
        tids = model.get_tokens_ids(tokens)
        if not tids:
            return ids, pos, np.zeros(len(ids))
        return ids, pos, np.asarray(model.get_scores_from_ids(tids), dtype=np.float64)

    def search(
        self, query: str | Sequence[str], top_k: int, allowed_ids: Collection[str] | None = None
    ) -> list[tuple[str, float]]:
        """``[(chunk_id, score)]``: the ``top_k`` best chunks with score > 0, score descending,
        ties by chunk id. ``allowed_ids`` restricts the candidates when given."""
        if top_k <= 0:
            return []
        ids, pos, arr = self._score_array(query)
        if arr.size == 0:
            return []
        if allowed_ids is not None:
            mask = np.zeros(arr.size, dtype=bool)
            sel = [pos[c] for c in allowed_ids if c in pos]
            mask[sel] = True
            arr = np.where(mask, arr, 0.0)
        order = top_positions(arr, top_k)
        return list(zip([ids[i] for i in order.tolist()], arr[order].tolist()))
