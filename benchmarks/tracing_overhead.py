"""Cost of tracing: the same questions with tracing off (NullTracer) and on (in-memory exporter),
interleaved in one process so machine noise hits both alike.

Usage: .venv/bin/python benchmarks/tracing_overhead.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from rag_lab.lab import Lab
from rag_lab.observability.tracing import NullTracer, build_tracer

DOCS = {
    "a.md": "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.",
    "b.md": "Sourdough bread rises thanks to a starter of wild yeast and lactic acid bacteria.",
    "c.md": "Mount Ember is a stratovolcano whose last eruption was recorded in 1921.",
}
QUESTIONS = ["Who built the lighthouse?", "What makes sourdough rise?", "When did Mount Ember erupt?"]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as d:
        docs = Path(d) / "docs"
        docs.mkdir()
        for name, text in DOCS.items():
            (docs / name).write_text(text)
        lab = Lab.from_config(workspace=Path(d) / "ws")
        lab.ingest(docs, kb="k", progress=False)
        for q in QUESTIONS:  # warm the caches
            lab.ask(q, kb="k", snapshots=False)
        off, on = NullTracer(), build_tracer({"exporter": "memory"})
        times = {"off": [], "on": []}
        for _ in range(rounds):
            for name, tracer in (("off", off), ("on", on)):
                lab.services.tracer = tracer
                t0 = time.perf_counter()
                for q in QUESTIONS:
                    lab.ask(q, kb="k", snapshots=False)
                times[name].append((time.perf_counter() - t0) * 1000 / len(QUESTIONS))
    off_ms, on_ms = statistics.median(times["off"]), statistics.median(times["on"])
    print(
        f"median ms/question over {rounds} rounds: tracing off {off_ms:.2f}, on (in-memory exporter) {on_ms:.2f}, "
        f"on/off = {on_ms / off_ms:.3f}"
    )


if __name__ == "__main__":
    main()
