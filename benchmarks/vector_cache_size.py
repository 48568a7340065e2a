"""The vector cache's file size against the raw bytes of the vectors it holds.

Usage: .venv/bin/python benchmarks/vector_cache_size.py [N]

Stores N random 384-float vectors (MiniLM's width, default 5,000) in a new cache file in batches of
500, checkpoints the WAL and prints ``vector cache: X MB on disk for Y MB of vectors (R×)``; the
goal is R ≤ 1.3. The vectors read back equal the stored ones bit for bit.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    from rag_lab.models.vector_cache import VectorCache

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    texts = [f"text number {i}" for i in range(n)]
    vecs = np.random.default_rng(0).standard_normal((n, 384)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.sqlite"
        store = VectorCache(path)
        for i in range(0, n, 500):
            store.put_many("bench", texts[i : i + 500], vecs[i : i + 500])
        store.close()
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = path.stat().st_size
        back = VectorCache(path).get_many("bench", texts[:100])
        assert all(np.array_equal(b, v) for b, v in zip(back, vecs[:100]))
    print(
        f"vector cache: {size / 1e6:.2f} MB on disk for {vecs.nbytes / 1e6:.2f} MB of vectors "
        f"({size / vecs.nbytes:.2f}×; goal <= 1.3×)"
    )


if __name__ == "__main__":
    main()
