"""Sweep throughput: (config × question) evaluations per second over post-retrieval params, with the
stage cache vs re-running the whole pipeline for every config.

Usage: .venv/bin/python benchmarks/sweep.py [N_QUESTIONS] [MAX_DOCS]

One process, one lab, one HotpotQA slice (default 20 questions, their gold documents plus
distractors up to 80 documents). The grid (3 rerank thresholds × 3 MMR λ × 2 top-K = 18 configs)
touches only stages after retrieval. Both modes first run one config unrecorded, so the in-process
embedding caches (rerank passages, answer sentences) are warm in both and the comparison isolates
what the stage cache saves: query embedding, hybrid search and rerank-model calls. Four numbers
are printed side by side:

* pipeline: every config re-runs every stage (no stage cache);
* stage cache: search results, rerank scores and query embeddings come from the cache;
* stage cache, new lab: a fresh Lab (cold in-memory caches) reading the already filled cache
  folder, as a later sweep in another process would;
* pipeline, new lab: a fresh Lab without the stage cache (what that later sweep costs without it).

It also checks that both modes produce the same metrics for every config. Ratios, not absolute
times, are what to compare (the development machine is a shared 2-core VM).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from pathlib import Path

from rag_lab.eval.cache import enable_stage_cache
from rag_lab.eval.runner import SuiteSpec, evaluate_lab, ingest_dataset
from rag_lab.lab import Lab

GRID = [
    {"rerank_threshold": t, "mmr_lambda": m, "rerank_top_k": k}
    for t, m, k in itertools.product((0.2, 0.35, 0.5), (0.5, 0.7, 0.9), (5, 10))
]


STAGES: dict[str, dict[str, list[float]]] = {}


async def sweep(lab: Lab, ds, kb: str, configs: list[dict], mode: str = "") -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    summaries = []
    for cfg in configs:
        res = await evaluate_lab(lab, ds, kb, progress=False, params=cfg, keep_runs=False)
        summaries.append(res.summary())
        if mode:
            for r in res.records:
                per = STAGES.setdefault(mode, {})
                for stage, ms in r.stage_ms.items():
                    per.setdefault(stage, []).append(ms)
                per.setdefault("whole question (lab.aask)", []).append(r.latency_ms)
    return time.perf_counter() - t0, summaries


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    max_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    spec = SuiteSpec("hotpotqa_hipporag100", n, max_docs)
    ds = spec.load()
    evals = len(GRID) * len(ds.queries)
    with tempfile.TemporaryDirectory() as tmp:
        ws, cache_dir = Path(tmp) / "ws", Path(tmp) / "cache"
        lab = Lab.from_config(workspace=ws)
        t0 = time.perf_counter()
        ingest_dataset(lab, ds, spec.kb_name)
        ingest_s = time.perf_counter() - t0

        await sweep(lab, ds, spec.kb_name, GRID[:1])  # warm the in-process embedding caches
        plain_s, plain = await sweep(lab, ds, spec.kb_name, GRID, "pipeline")

        handle = enable_stage_cache(lab, cache_dir)
        t0 = time.perf_counter()
        await sweep(lab, ds, spec.kb_name, GRID[:1])  # fills the stage cache
        fill_s = time.perf_counter() - t0
        cached_s, cached = await sweep(lab, ds, spec.kb_name, GRID, "stage cache")
        stats = handle.stats()
        handle.disable()

        fresh = Lab.from_config(workspace=ws)
        enable_stage_cache(fresh, cache_dir)
        fresh_cached_s, fresh_cached = await sweep(fresh, ds, spec.kb_name, GRID)
        cold = Lab.from_config(workspace=ws)
        cold_s, cold_plain = await sweep(cold, ds, spec.kb_name, GRID)

    same = plain == cached == fresh_cached == cold_plain
    print(
        f"HotpotQA slice: {len(ds.queries)} questions, {len(ds.corpus)} documents (ingested in {ingest_s:.1f} s); "
        f"{len(GRID)} configs over rerank_threshold × mmr_lambda × rerank_top_k = {evals} evaluations per mode"
    )
    print(f"{'mode':<28}{'seconds':>9}{'evals/s':>10}{'vs pipeline':>13}")
    for name, secs in (
        ("pipeline (warm lab)", plain_s),
        ("stage cache (warm lab)", cached_s),
        ("pipeline (new lab)", cold_s),
        ("stage cache (new lab)", fresh_cached_s),
    ):
        print(f"{name:<28}{secs:>9.1f}{evals / secs:>10.1f}{plain_s / secs:>12.2f}x")
    print(
        f"stage cache speed-up, warm lab: {plain_s / cached_s:.2f}x; new lab: {cold_s / fresh_cached_s:.2f}x; "
        f"filling the cache (one config): {fill_s:.1f} s"
    )
    print(
        "stage cache counters (warm sweep incl. fill): "
        + ", ".join(f"{k} {v.hits} hits / {v.misses} misses" for k, v in stats.items())
    )
    print(f"mean ms per question, warm lab: {'stage':<28}{'pipeline':>10}{'cached':>10}")
    for stage in STAGES["pipeline"]:
        a = sum(STAGES["pipeline"][stage]) / len(STAGES["pipeline"][stage])
        b = sum(STAGES["stage cache"][stage]) / len(STAGES["stage cache"][stage])
        if a >= 0.5 or b >= 0.5:
            print(f"{'':<32}{stage:<28}{a:>10.1f}{b:>10.1f}")
    print(f"identical metrics in every mode for every config: {'yes' if same else 'NO'}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
