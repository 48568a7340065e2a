"""Memory of a KB's whole rows held for search (``KbRows``: chunk and document rows), measured
with tracemalloc (what the tables allocate, values shared between rows counted once), next to the
``sys.getsizeof`` upper bound ``search.py`` prints and the plain text of the chunks alone.

Usage: .venv/bin/python benchmarks/kb_rows_memory.py [N_DOCS]   (default 100000; synthetic
one-chunk documents of 30–55 words, as ``search.py``'s scale curve)

Prints ``KbRows at N chunks: X MB (tracemalloc), Y MB (getsizeof bound), text alone Z MB``; the
goal is X <= 100 MB at 100k chunks.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.search import held_rows_mb, synthetic_corpus  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    from rag_lab.knowledge.kb_rows import KbRows
    from rag_lab.knowledge.workspace import Workspace

    emb, docs, _ = synthetic_corpus(n, 10)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace(Path(tmp) / "ws")
        kb = ws.create_kb("mem", emb)
        t0 = time.perf_counter()
        ws.ingest_documents(kb, docs, emb, progress=False)
        print(f"{n} documents ingested in {time.perf_counter() - t0:.1f} s")
        store = ws.store
        text_mb = sum(sys.getsizeof(d["text"]) for d in docs) / 2**20
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        rows = KbRows(store)
        chunks = rows.chunks(kb.id)
        documents = rows.documents(kb.id)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert chunks is not None and documents is not None, "the KB did not fit in KbRows.max_rows"
        store.kb_rows = rows  # held_rows_mb reads the store's tables
        bound = held_rows_mb(store)
        print(
            f"KbRows at {len(chunks)} chunks + {len(documents)} documents: {(after - before) / 2**20:.1f} MB "
            f"(tracemalloc), {bound:.1f} MB (getsizeof bound), text alone {text_mb:.1f} MB"
        )
        # the load's time, without tracemalloc: values shared (the default) vs one object per row
        from rag_lab.knowledge import kb_rows

        shared, ids, own_ids = dict(kb_rows._SHARED_COLUMNS), dict(kb_rows._DOCUMENT_ID), KbRows._ids
        times: dict[str, list[float]] = {"shared": [], "per row": []}
        for rnd in range(3):
            for mode in ("shared", "per row") if rnd % 2 == 0 else ("per row", "shared"):
                if mode == "per row":
                    kb_rows._SHARED_COLUMNS = {t: frozenset() for t in shared}
                    kb_rows._DOCUMENT_ID = {t: "-" for t in ids}  # not a column: nothing shared
                    KbRows._ids = lambda self, table, kb_id: {}  # type: ignore[method-assign]
                gc.collect()
                t0 = time.perf_counter()
                fresh = KbRows(store)
                fresh.chunks(kb.id)
                fresh.documents(kb.id)
                times[mode].append(time.perf_counter() - t0)
                kb_rows._SHARED_COLUMNS, kb_rows._DOCUMENT_ID = shared, ids
                KbRows._ids = own_ids  # type: ignore[method-assign]
                del fresh
        print(
            "KbRows load (chunks + documents, best of 3): "
            + ", ".join(f"{m} {min(ts):.2f} s" for m, ts in times.items())
        )
        ws.close()


if __name__ == "__main__":
    main()
