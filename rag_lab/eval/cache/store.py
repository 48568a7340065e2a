"""The stage cache's store (one SQLite file in the shared storage layer) and its per-stage counters."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.blobstore import BlobStore, StoreStats
from rag_lab.eval.cache.keys import CACHE_FORMAT, _json_default, canonical_json

#: the store's file inside the stage cache folder (built BM25 indexes sit beside it, in ``bm25/``)
FILE_NAME = "stages.sqlite"
#: default bound on the entries' bytes; the least recently used go first past it
DEFAULT_MAX_BYTES = 2 * 1024 * 1024 * 1024


@dataclass
class CacheStats:
    """Counters of one stage."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    errors: int = 0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses
        return self.hits / n if n else float("nan")


class StageCache:
    """Entries by (stage, key) in ``<root>/stages.sqlite`` (see the package docstring).

    ``memory_entries`` > 0 keeps that many recently used entries' JSON text in memory as well
    (a read still parses the text, so callers always get fresh objects they may mutate).
    ``max_bytes`` bounds the file's entries (:mod:`rag_lab.blobstore`).
    """

    def __init__(self, root: str | Path, memory_entries: int = 4096, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"stage cache {self.root}: exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = BlobStore(self.root / FILE_NAME, max_bytes, "stage cache")
        self.memory_entries = max(0, int(memory_entries))
        self._memory: OrderedDict[bytes, str] = OrderedDict()
        self._stats: dict[str, CacheStats] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StageCache({str(self.root)!r})"

    def close(self) -> None:
        """Write pending use times and close the store's connections (they open again on use)."""
        self.store.close()

    # -- keys and counters ------------------------------------------------------------------
    @staticmethod
    def row_key(stage: str, key: object) -> bytes:
        """The store's key of an entry: SHA-256 of the format, the stage and the key's canonical JSON."""
        text = f"{CACHE_FORMAT}\x00{stage}\x00{canonical_json(key)}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def _count(self, stage: str, what: str) -> None:
        with self._lock:
            st = self._stats.setdefault(stage, CacheStats())
            setattr(st, what, getattr(st, what) + 1)

    def stats(self) -> dict[str, CacheStats]:
        """A copy of the per-stage counters."""
        with self._lock:
            return {k: dataclasses.replace(v) for k, v in sorted(self._stats.items())}

    # -- read / write -----------------------------------------------------------------------
    def _remember(self, row: bytes, text: str) -> None:
        if not self.memory_entries:
            return
        with self._lock:
            self._memory[row] = text
            self._memory.move_to_end(row)
            while len(self._memory) > self.memory_entries:
                self._memory.popitem(last=False)

    def get(self, stage: str, key: object) -> Any | None:
        """The payload stored for ``key`` (a fresh object), or ``None`` on a miss."""
        row = self.row_key(stage, key)
        with self._lock:
            text = self._memory.get(row)
            if text is not None:
                self._memory.move_to_end(row)
        if text is None:
            found = self.store.get_many([row])
            blob = None if found is None else found.get(row)
            if blob is None:
                if found is None:  # the file could not be read
                    self._count(stage, "errors")
                self._count(stage, "misses")
                return None
        try:
            if text is None:
                text = blob.decode("utf-8", "surrogatepass")
            payload = json.loads(text)
        except ValueError:  # a damaged row (not UTF-8, not JSON): a miss, rewritten by the next put
            self._count(stage, "errors")
            self._count(stage, "misses")
            return None
        self._remember(row, text)
        self._count(stage, "hits")
        return payload

    def put(self, stage: str, key: object, payload: object) -> None:
        """Store ``payload`` (JSON-serialisable) under ``key``; last writer wins. A write the
        file refuses (locked, read-only) counts as an error and is skipped."""
        row = self.row_key(stage, key)
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=_json_default)
        if self.store.put_many(stage, [(row, text.encode("utf-8", "surrogatepass"))], replace=True) is None:
            self._count(stage, "errors")
            return
        self._remember(row, text)
        self._count(stage, "writes")

    def entries(self, stage: str | None = None) -> int:
        """Number of entries stored (for one stage, or all)."""
        spaces = self.store_stats()["spaces"]
        if stage is not None:
            return spaces[stage]["rows"] if stage in spaces else 0
        return sum(s["rows"] for s in spaces.values())

    def store_stats(self) -> StoreStats:
        """The store's rows and bytes, per stage, against its bound (:meth:`BlobStore.stats`)."""
        return self.store.stats()

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()
