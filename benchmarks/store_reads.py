"""Knowledge-store reads the search path makes: random chunk rows by id (hit rows, hydration), with
and without SQLite's memory map, and the decoding of a row into a ``Chunk``.

Usage: .venv/bin/python benchmarks/store_reads.py [N_CHUNKS] [ROWS] [REPS]

A store of N synthetic chunks (default 100,000, ~500 characters each) is written once; then, on
fresh connections, ``SELECT <the six hit columns> WHERE id IN (ROWS random ids)`` is timed REPS
times per setting, the settings taking turns: ``mmap_size`` 0 (SQLite reads pages with read()
into its own cache) vs :data:`rag_lab.knowledge.sqlite_conn.MMAP_BYTES` (what the stores use).
The file is in the OS page cache in both (it was just written and read). Then whole rows
(``SELECT *``) fetched as ``sqlite3.Row`` vs plain tuples (what the getters use). Then the decoding of
2,000 rows into ``Chunk`` objects: a reference decoder reading columns by name, ``_from_row``
(one row at a time, the decoder looked up from the row's column names) and ``_decode_rows`` (a
whole query's rows with one lookup, what the batch getters use), equal objects asserted.
"""

from __future__ import annotations

import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rag_lab.knowledge import store as store_mod
from rag_lab.knowledge.models import Chunk, KnowledgeBase
from rag_lab.knowledge.sqlite_conn import MMAP_BYTES
from rag_lab.knowledge.store import KnowledgeStore

COLUMNS = "id, knowledge_id, chunk_type, tag_id, is_enabled, index_status, content"


def by_name(row: sqlite3.Row) -> Chunk:
    """The reference: every column looked up by name, JSON decoded with json.loads."""
    names, js, bools = store_mod._SPECS[Chunk]
    kw = {}
    for n in names:
        v = row[n]
        if n in js:
            v = json.loads(v) if v else ({} if n in ("metadata", "custom_metadata") else [])
        elif n in bools:
            v = bool(v)
        kw[n] = v
    return Chunk(**kw)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 150
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.sqlite"
        st = KnowledgeStore(path)
        st.create_kb(KnowledgeBase(id="kb", name="kb", embedding_model_key="m|u", embedding_dim=8))
        words = [f"w{i}" for i in range(5000)]
        ids = [f"kb:d{i}#c0" for i in range(n)]
        t0 = time.perf_counter()
        for start in range(0, n, 10_000):
            st.add_chunks(
                Chunk(
                    id=ids[i],
                    knowledge_id=f"d{i}",
                    knowledge_base_id="kb",
                    content=" ".join(rng.choice(words) for _ in range(90)),
                    metadata={"n": i} if i % 3 else {},
                )
                for i in range(start, min(n, start + 10_000))
            )
        st.close()
        print(f"{n:,} chunks written in {time.perf_counter() - t0:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
        conns = {}
        for label, mmap in (("read() into SQLite's cache", 0), (f"memory map ({MMAP_BYTES >> 20} MB)", MMAP_BYTES)):
            c = sqlite3.connect(str(path))
            c.execute(f"PRAGMA mmap_size={mmap}")
            conns[label] = c
        times: dict[str, list[float]] = {k: [] for k in conns}
        for _ in range(reps):
            batch = rng.sample(ids, rows)
            q = f"SELECT {COLUMNS} FROM chunks WHERE id IN ({', '.join('?' * rows)})"
            for label, c in conns.items():
                t0 = time.perf_counter()
                got = c.execute(q, batch).fetchall()
                times[label].append((time.perf_counter() - t0) * 1000)
                assert len(got) == rows
        p50 = {k: statistics.median(v[5:]) for k, v in times.items()}
        base, mm = p50.values()
        print(
            f"{rows} random rows by id, p50 over {reps} reads: " + ", ".join(f"{k} {v:.3f} ms" for k, v in p50.items())
        )
        print(f"memory map / read(): {mm / base:.2f}")

        # whole rows (SELECT *) fetched as sqlite3.Row vs as plain tuples (the store's getters),
        # the same random ids for both, the order alternating
        by_row = sqlite3.connect(str(path))
        by_row.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        by_row.row_factory = sqlite3.Row
        as_tuples = sqlite3.connect(str(path))
        as_tuples.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        fetch = {"sqlite3.Row": by_row, "tuples": as_tuples}
        got_ms: dict[str, list[float]] = {k: [] for k in fetch}
        whole = f"SELECT * FROM chunks WHERE id IN ({', '.join('?' * rows)})"
        for i in range(reps):
            batch = rng.sample(ids, rows)
            for label in list(fetch)[:: 1 if i % 2 else -1]:
                t0 = time.perf_counter()
                fetched = fetch[label].execute(whole, batch).fetchall()
                got_ms[label].append((time.perf_counter() - t0) * 1000)
                assert len(fetched) == rows
        print(
            f"{rows} whole rows by id, p50 (each batch read by both, the first read cold): "
            + ", ".join(f"{k} {statistics.median(v[5:]):.3f} ms" for k, v in got_ms.items())
        )

        c = sqlite3.connect(str(path))
        c.row_factory = sqlite3.Row
        query = "SELECT * FROM chunks LIMIT 2000"
        sample = c.execute(query).fetchall()
        expected = [by_name(r) for r in sample]
        assert [store_mod._from_row(Chunk, r) for r in sample] == expected
        assert list(store_mod._decode_rows(Chunk, c.execute(query))) == expected
        decoders = {
            "by name (reference)": lambda: [by_name(r) for r in sample],
            "_from_row": lambda: [store_mod._from_row(Chunk, r) for r in sample],
            "_decode_rows (query included)": lambda: list(store_mod._decode_rows(Chunk, c.execute(query))),
            "the query alone": lambda: c.execute(query).fetchall(),
        }
        dec: dict[str, list[float]] = {k: [] for k in decoders}
        for _ in range(5):
            for label, fn in decoders.items():
                t0 = time.perf_counter()
                fn()
                dec[label].append((time.perf_counter() - t0) * 1e6 / len(sample))
        print("row → Chunk, µs per row (best of 5): " + ", ".join(f"{k} {min(v):.2f}" for k, v in dec.items()))


if __name__ == "__main__":
    main()
