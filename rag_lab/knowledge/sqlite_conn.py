"""One SQLite connection per thread for the embedded stores (knowledge, graph): WAL journal,
30 s busy timeout, rows by name, reads through a memory map of up to :data:`MMAP_BYTES` of the file;
an open failure raises the store's own error naming the file."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

#: ``PRAGMA mmap_size``: pages read through a memory map instead of read() calls into SQLite's own
#: cache. Search hydrates rows at random places in the file; at 100k chunks (69 MB) 150 rows load
#: in 0.35 vs 0.67 ms p50 (``benchmarks/store_reads.py``). Address space only: nothing is read ahead.
MMAP_BYTES = 256 * 1024 * 1024


class ThreadConnections:
    def __init__(self, path: Path, error: type[Exception], what: str, foreign_keys: bool = False) -> None:
        self.path, self.error, self.what, self.foreign_keys = path, error, what, foreign_keys
        self._local = threading.local()
        self._lock = threading.Lock()
        self.all: list[sqlite3.Connection] = []
        self.closed = False

    def get(self) -> sqlite3.Connection:
        if self.closed:
            raise self.error(f"{self.path}: {self.what} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False)
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
                if self.foreign_keys:
                    conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as exc:
                raise self.error(f"{self.path}: cannot open SQLite {self.what}: {exc}") from None
            self._local.conn = conn
            with self._lock:
                self.all.append(conn)
        return conn

    def close(self) -> None:
        self.closed = True
        with self._lock:
            conns, self.all = self.all, []
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
