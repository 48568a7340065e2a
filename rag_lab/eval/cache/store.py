"""The on-disk content-addressed store of the stage cache and its per-stage counters."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.eval.cache.keys import CACHE_FORMAT, _json_default, canonical_json


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
    """Content-addressed JSON entries under ``root`` (see the module docstring).

    ``memory_entries`` > 0 keeps that many recently used entries' JSON text in memory as well
    (a read still parses the text, so callers always get fresh objects they may mutate).
    """

    def __init__(self, root: str | Path, memory_entries: int = 4096) -> None:
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"stage cache {self.root}: exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)
        self.memory_entries = max(0, int(memory_entries))
        self._memory: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._stats: dict[str, CacheStats] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StageCache({str(self.root)!r})"

    # -- paths and counters -----------------------------------------------------------------
    def path_for(self, stage: str, digest: str) -> Path:
        return self.root / stage / digest[:2] / f"{digest}.json"

    def _count(self, stage: str, what: str) -> None:
        with self._lock:
            st = self._stats.setdefault(stage, CacheStats())
            setattr(st, what, getattr(st, what) + 1)

    def stats(self) -> dict[str, CacheStats]:
        """A copy of the per-stage counters."""
        with self._lock:
            return {k: dataclasses.replace(v) for k, v in sorted(self._stats.items())}

    # -- read / write -----------------------------------------------------------------------
    def _remember(self, mkey: tuple[str, str], text: str) -> None:
        if not self.memory_entries:
            return
        with self._lock:
            self._memory[mkey] = text
            self._memory.move_to_end(mkey)
            while len(self._memory) > self.memory_entries:
                self._memory.popitem(last=False)

    @staticmethod
    def _head(stage: str, key_text: str) -> str:
        """An entry's text up to its payload: ``{"format":F,"stage":S,"key":K,"payload":`` with
        the key as its canonical JSON. A read compares this head as text instead of parsing the key
        and writing it again, and parses the payload only."""
        return f'{{"format":{CACHE_FORMAT},"stage":{json.dumps(stage, ensure_ascii=False)},"key":{key_text},"payload":'

    def get(self, stage: str, key: object) -> Any | None:
        """The payload stored for ``key`` (a fresh object), or ``None`` on a miss."""
        key_text = canonical_json(key)
        digest = hashlib.sha256(key_text.encode("utf-8")).hexdigest()
        mkey = (stage, digest)
        with self._lock:
            text = self._memory.get(mkey)
            if text is not None:
                self._memory.move_to_end(mkey)
        if text is None:
            path = self.path_for(stage, digest)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                self._count(stage, "misses")
                return None
            except OSError:
                self._count(stage, "errors")
                self._count(stage, "misses")
                return None
        head = self._head(stage, key_text)
        payload: object = None
        ok = text.startswith(head) and text.endswith("}")
        if ok:
            try:
                payload = json.loads(text[len(head) : -1])
            except ValueError:
                ok = False
        if not ok:  # another format, another key under this digest, or a damaged file
            self._count(stage, "errors")
            self._count(stage, "misses")
            return None
        self._remember(mkey, text)
        self._count(stage, "hits")
        return payload

    def put(self, stage: str, key: object, payload: object) -> Path:
        """Store ``payload`` (JSON-serialisable) under ``key``; atomic, last writer wins."""
        key_text = canonical_json(key)
        digest = hashlib.sha256(key_text.encode("utf-8")).hexdigest()
        payload_text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=_json_default)
        text = self._head(stage, key_text) + payload_text + "}"
        path = self.path_for(stage, digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._remember((stage, digest), text)
        self._count(stage, "writes")
        return path

    def entries(self, stage: str | None = None) -> int:
        """Number of entries on disk (for one stage, or all)."""
        base = self.root / stage if stage else self.root
        return sum(1 for p in base.rglob("*.json") if not p.name.startswith(".tmp-")) if base.is_dir() else 0

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()
