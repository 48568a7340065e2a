"""The workspace's vector cache: float32 vectors by (embedding model, exact text), on disk.

One SQLite file (``<workspace>/vectors.sqlite``) shared by every process on the workspace, kept by
the storage layer both caches share (:mod:`rag_lab.blobstore`: bounded in bytes, least recently
used rows evicted first, WAL with a connection per thread, a failed read or write logged once and
skipped so the caller computes the vectors). A row's key is the SHA-256 of the model key and the
text (``model_key``, a NUL byte, the UTF-8 text), so a vector is only ever served for the very text
and model it was computed with: a model whose key changes (another model, another endpoint, a
tokenizer whose hash is part of the key) misses. Each model key is a space of the store. The vector
is stored as its little-endian float32 bytes and read back with ``numpy.frombuffer``, so a cached
vector equals the freshly computed one bit for bit (``tests/models/test_vector_cache.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from rag_lab.blobstore import BlobStore, SpaceStats

if TYPE_CHECKING:
    import numpy.typing as npt

#: the file's name inside the workspace
FILE_NAME = "vectors.sqlite"
#: default bound on the rows' bytes: about 650,000 MiniLM vectors (384 float32 + key)
DEFAULT_MAX_BYTES = 1024 * 1024 * 1024


class VectorCacheStats(TypedDict):
    """What :meth:`VectorCache.stats` reports: the store's figures, per model key."""

    path: str
    rows: int
    bytes: int
    max_bytes: int
    file_bytes: int
    models: dict[str, SpaceStats]
    reads: int
    writes: int
    evicted: int


def vector_key(model_key: str, text: str) -> bytes:
    """The row key of ``text`` embedded by the model ``model_key``."""
    return hashlib.sha256(model_key.encode("utf-8") + b"\x00" + text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """Vectors by (model key, text) in the SQLite file ``path`` (see the module docstring)."""

    def __init__(self, path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.store = BlobStore(path, max_bytes, "vector cache")
        self.path = self.store.path
        self.max_bytes = self.store.max_bytes

    def __repr__(self) -> str:
        return f"VectorCache({str(self.path)!r}, max_bytes={self.max_bytes})"

    def close(self) -> None:
        self.store.close()

    def flush(self) -> None:
        """Write the use times of the rows read since the last write."""
        self.store.flush()

    def get_many(self, model_key: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text (read-only float32 arrays), ``None`` where there is none."""
        keys = [vector_key(model_key, t) for t in texts]
        found = self.store.get_many(keys) or {}
        out: list[np.ndarray | None] = []
        for k in keys:
            blob = found.get(k)
            out.append(None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32, copy=False))
        return out

    def has_many(self, model_key: str, texts: Sequence[str]) -> list[bool]:
        """Whether each text has a cached vector (the vectors are not read)."""
        keys = [vector_key(model_key, t) for t in texts]
        present = self.store.has_many(keys) or set()
        return [k in present for k in keys]

    def put_many(self, model_key: str, texts: Sequence[str], vectors: npt.ArrayLike) -> int:
        """Store the vectors of ``texts`` (rows already there are kept); returns the rows added.
        Evicts the least recently used rows when the bound is passed."""
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(texts):
            raise ValueError(f"vector cache: {len(texts)} texts but vectors of shape {arr.shape}")
        little = arr.astype("<f4", copy=False)
        rows = [(vector_key(model_key, t), little[i].tobytes()) for i, t in enumerate(texts)]
        return self.store.put_many(model_key, rows) or 0

    def clear(self, model_key: str | None = None) -> int:
        """Remove every row (or those of one model key, whatever code version filed them: see
        :func:`~rag_lab.models.embedding.vector_store_key`) and vacuum the file; returns the rows removed."""
        if model_key is None:
            return self.store.clear()
        # the model key as given, and the store keys filed under it (``<key>|code:<tag>``)
        return self.store.clear(lambda key: key == model_key or key.startswith(model_key + "|code:"))

    def stats(self) -> VectorCacheStats:
        """Rows and counted bytes (all models and per model key), the bound, the file's size on
        disk (with its WAL) and this object's reads, writes and evictions."""
        s = self.store.stats()
        return {
            "path": s["path"],
            "rows": s["rows"],
            "bytes": s["bytes"],
            "max_bytes": s["max_bytes"],
            "file_bytes": s["file_bytes"],
            "models": s["spaces"],
            "reads": s["reads"],
            "writes": s["writes"],
            "evicted": s["evicted"],
        }
