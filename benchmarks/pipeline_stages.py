"""Per-stage latency of the offline pipeline on the bundled HotpotQA set, cold vs warm caches.

Usage: .venv/bin/python benchmarks/pipeline_stages.py [N_QUESTIONS]

Runs the same N questions twice in one process: the first pass fills the embedding cache used by
the rerank re-scorer and the extractive answerer, the second reuses it. Prints mean milliseconds
per stage for both passes and the warm/cold ratio (ratios, not absolute times, are what to
compare: this machine is shared and noisy).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import defaultdict

from rag_lab.eval.datasets import load_dataset
from rag_lab.lab import Lab


def run_pass(lab: Lab, questions: list[str]) -> dict[str, float]:
    per_stage: dict[str, list[float]] = defaultdict(list)
    for q in questions:
        run = lab.ask(q, kb="hotpotqa", snapshots=False)
        for t in run.timings:
            per_stage[t.event].append(t.duration_ms)
        per_stage["total (incl. answer stream)"].append(run.total_ms)
    return {k: statistics.mean(v) for k, v in per_stage.items()}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    ds = load_dataset("hotpotqa_hipporag100")
    with tempfile.TemporaryDirectory() as ws:
        lab = Lab.from_config(workspace=ws)
        t0 = time.perf_counter()
        lab.ingest_documents(
            [{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus], kb="hotpotqa", progress=False
        )
        ingest_s = time.perf_counter() - t0
        qs = [q.question for q in ds.queries[:n]]
        cold = run_pass(lab, qs)
        warm = run_pass(lab, qs)
    print(f"ingest {len(ds.corpus)} passages: {ingest_s:.1f} s ({len(ds.corpus) / ingest_s:.0f} passages/s)")
    print(f"{'stage':<30}{'cold ms':>10}{'warm ms':>10}{'warm/cold':>11}")
    for stage in cold:
        c, w = cold[stage], warm[stage]
        print(f"{stage:<30}{c:>10.1f}{w:>10.1f}{(w / c if c else float('nan')):>11.2f}")


if __name__ == "__main__":
    main()
