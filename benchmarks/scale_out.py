"""Scale-out figures: Milvus Lite vs the local engine, Ray vs in-process sweeps, and two
``rag-lab serve`` replicas vs one.

Usage:
    .venv/bin/python benchmarks/scale_out.py                       # both parts, ~3 min on a 2-core VM
    .venv/bin/python benchmarks/scale_out.py --part ray --workers 1 2   # by number of workers (~4 min)
    .venv/bin/python benchmarks/scale_out.py --part milvus --docs 20000 --queries 200
    nice -n 10 .venv/bin/python benchmarks/scale_out.py --part milvus --docs 100000 --queries 200   # ~10 min
    .venv/bin/python benchmarks/scale_out.py --part ray --configs 12 --questions 10 --workers 1 2 4
    .venv/bin/python benchmarks/scale_out.py --part replicas --asks 160 --concurrency 8   # ~2 min

**Milvus** (extra ``milvus``), on one synthetic topic corpus (``benchmarks/search.py``'s
generator: one chunk per document, 384-d bag-of-words topic embeddings), in one process:

* ingest rate — ``Workspace.ingest_documents`` into the local engine (chunking, embedding, FAISS,
  bm25s, SQLite), and the Milvus Lite copy of the same KB (``MilvusEngine.index_documents``:
  rows from SQLite, vectors reused from the local index, BM25 computed by Milvus);
* per-query latency p50 / p95 of ``vector_search`` and ``keyword_search`` (top 10) on each engine,
  and of the whole ``HybridSearcher.search`` with each engine behind it;
* vector recall@10 against exact numpy cosine, and the overlap of the two engines' BM25 top 10.

Milvus Lite is an in-process Python server reached over loopback gRPC: a test double for the
Milvus API, not a faster backend. Its figures say what the client path costs, not what a Milvus
server would do.

**Ray** (extra ``distributed``), on a HotpotQA slice with the stage cache:

* the in-process grid (``run_grid``) on the full pipeline and with the fast evaluator, and the
  same grid on a local Ray cluster for each number of workers (``run_sweep_on_ray``: Tune trials
  on the pipeline, then tasks per chunk of configs with the fast evaluator): wall time,
  (config x question) evaluations per second, and the cluster start measured apart;
* Ray's own costs on the same cluster: a no-op Tune trial (seconds per trial with 1 concurrent
  trial) and a no-op remote task (ms per task).

**Replicas** (extra ``postgres``; PostgreSQL and redis-server installed): one and two
``rag-lab serve`` processes over one PostgreSQL store and one Redis on this machine
(``benchmarks/replicas.py``), offline models, the HotpotQA distractor-40 corpus: asks per second
for the same asks sent to one replica, then to both in turn, and the ratio.

The machine this ran on is a shared 2-core VM: more than 2 workers cannot speed anything up
here, and absolute times drift with the other processes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TOP_K = 10


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def _ms(values: list[float]) -> str:
    return f"p50 {_pct(values, 0.5) * 1e3:.2f} ms, p95 {_pct(values, 0.95) * 1e3:.2f} ms"


# --------------------------------------------------------------------------- Milvus


def bench_milvus(n_docs: int, n_queries: int, tenancy: str = "partition_key") -> None:
    from search import synthetic_corpus

    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.base import SearchScope
    from rag_lab.retrieval.hybrid_search import HybridSearcher, SearchParams
    from rag_lab.retrieval.milvus_engine import MilvusEngine

    print(
        f"== Milvus Lite vs local engine: {n_docs} synthetic chunks, {n_queries} queries, top {TOP_K}, "
        f"tenancy {tenancy}"
    )
    t0 = time.perf_counter()
    emb, docs, queries = synthetic_corpus(n_docs, n_queries)
    print(f"corpus generated in {time.perf_counter() - t0:.1f} s (384-d hashed topic vectors, no model)", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="rag_lab_bench_milvus_"))
    ws = Workspace(tmp / "ws")
    kb = ws.create_kb("bench", emb, chunk_size=2000, chunk_overlap=0)
    t0 = time.perf_counter()
    ws.ingest_documents(kb, docs, emb, progress=False)
    t_local = time.perf_counter() - t0
    milvus = MilvusEngine(ws, {"uri": str(tmp / "milvus.db"), "tenancy": tenancy})
    t0 = time.perf_counter()
    milvus.ensure_collection(kb)
    t_create = time.perf_counter() - t0
    t0 = time.perf_counter()
    counts = milvus.index_documents(kb)  # upserts, then one flush (Lite seals and indexes the rows)
    t_copy = time.perf_counter() - t0
    print(
        f"ingest: local engine {n_docs / t_local:.0f} chunks/s ({t_local:.1f} s, embedding + FAISS + bm25s + SQLite); "
        f"Milvus Lite copy {counts.rows / counts.seconds:.0f} rows/s ({counts.seconds:.1f} s of upserts, vectors "
        f"reused; {counts.rows / t_copy:.0f} rows/s with the flush, {t_copy:.1f} s; collection created in "
        f"{t_create:.1f} s)",
        flush=True,
    )
    local = ws.engine()
    qvecs = emb.embed(queries)
    entries, mat = ws.vector_index(kb).export_vectors()
    ids = np.array([e.chunk_id for e in entries])
    lat: dict[str, list[float]] = {k: [] for k in ("lv", "mv", "lk", "mk", "lh", "mh")}
    recall_l, recall_m, overlap = [], [], []
    for engine, label in ((local, "local"), (milvus, "Milvus Lite")):  # warm both (jieba, first gRPC calls)
        t0 = time.perf_counter()
        engine.vector_search(qvecs[0], SearchScope([kb.id], TOP_K, 0.0))
        engine.keyword_search(queries[0], SearchScope([kb.id], TOP_K, 0.0))
        print(f"first vector + BM25 search, {label}: {time.perf_counter() - t0:.2f} s", flush=True)
    for q, v in zip(queries, qvecs):
        exact = set(ids[np.argsort(-(mat @ v), kind="stable")[:TOP_K]])
        for key, engine in (("l", local), ("m", milvus)):
            t = time.perf_counter()
            hits = engine.vector_search(v, SearchScope([kb.id], TOP_K, -1.0))
            lat[key + "v"].append(time.perf_counter() - t)
            (recall_l if key == "l" else recall_m).append(len(exact & {h.chunk_id for h in hits}) / TOP_K)
        t = time.perf_counter()
        kl = local.keyword_search(q, SearchScope([kb.id], TOP_K, 0.0))
        lat["lk"].append(time.perf_counter() - t)
        t = time.perf_counter()
        km = milvus.keyword_search(q, SearchScope([kb.id], TOP_K, 0.0))
        lat["mk"].append(time.perf_counter() - t)
        if kl:
            overlap.append(len({h.chunk_id for h in kl} & {h.chunk_id for h in km}) / len(kl))

    async def hybrid(engine: Any, key: str) -> None:
        searcher = HybridSearcher(ws, lambda _kb: emb, engine_for=lambda _kb: ("", engine))
        for q, v in zip(queries, qvecs):
            t = time.perf_counter()
            await searcher.search(kb.id, SearchParams(query_text=q, query_embedding=v, match_count=TOP_K))
            lat[key].append(time.perf_counter() - t)

    asyncio.run(hybrid(local, "lh"))
    asyncio.run(hybrid(milvus, "mh"))
    ratio = statistics.median(lat["mh"]) / statistics.median(lat["lh"])
    print(f"vector top {TOP_K}:  local {_ms(lat['lv'])} (flat, exact) | Milvus Lite {_ms(lat['mv'])} (HNSW)")
    print(f"BM25 top {TOP_K}:    local {_ms(lat['lk'])} | Milvus Lite {_ms(lat['mk'])}")
    print(
        f"HybridSearch (pool 50 per retriever, RRF, hydration): local {_ms(lat['lh'])} | Milvus Lite {_ms(lat['mh'])}"
    )
    print(f"HybridSearch p50 Milvus Lite / local = {ratio:.1f}x")
    print(
        f"vector recall@{TOP_K} vs exact: local {np.mean(recall_l):.3f}, Milvus Lite {np.mean(recall_m):.3f}; "
        f"BM25 top-{TOP_K} overlap Milvus Lite vs bm25s: {np.mean(overlap):.3f} (different IDF statistics and analyser)"
    )
    milvus.close()
    ws.close()
    shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- Ray


def _same_metrics(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = [k for k in a if "@" in k or k in ("mrr", "map")]
    return all(a[k] == b[k] for k in keys) and bool(keys)


def _noop_trial(config: dict[str, Any]) -> None:
    from ray import tune

    tune.report({"x": config["i"]})


def bench_ray(n_configs: int, n_questions: int, n_docs: int, workers: list[int]) -> None:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray import tune

    from rag_lab.eval.runner import SuiteSpec, ingest_dataset
    from rag_lab.eval.sweep import parse_param, run_grid
    from rag_lab.eval.sweep.distributed import init_ray, run_sweep_on_ray
    from rag_lab.lab.lab import Lab

    thresholds = [round(0.05 + 0.6 * i / max(1, n_configs - 1), 4) for i in range(n_configs)]
    spaces = [parse_param("rerank_threshold=" + ",".join(str(t) for t in thresholds))]
    spec = SuiteSpec("hotpotqa_hipporag100", n_questions, n_docs)
    n_evals = n_configs * n_questions
    print(f"== Ray vs in-process: grid of {n_configs} configs x {n_questions} questions (HotpotQA, {n_docs} docs)")
    tmp = Path(tempfile.mkdtemp(prefix="rag_lab_bench_ray_"))
    lab = Lab.from_config(workspace=tmp / "ws")
    ds = spec.load()
    ingest_dataset(lab, ds, spec.kb_name)
    suites = [(ds, spec.kb_name)]
    t0 = time.perf_counter()
    local = asyncio.run(run_grid(lab, suites, spaces, cache_dir=tmp / "cache_local", progress=False, fast=False))
    t_local = time.perf_counter() - t0
    print(f"in-process, pipeline: {t_local:.1f} s, {n_evals / t_local:.1f} evaluations/s (incl. one warm-up config)")
    t0 = time.perf_counter()
    local_fast = asyncio.run(run_grid(lab, suites, spaces, cache_dir=tmp / "cache_fast", progress=False, check=1))
    t_fast = time.perf_counter() - t0
    print(
        f"in-process, fast evaluator: {t_fast:.1f} s, {n_evals / t_fast:.1f} evaluations/s "
        "(capture + configs + 1 config re-checked on the pipeline)"
    )
    for w in workers:
        t0 = time.perf_counter()
        conn = init_ray(None, w)
        t_start = time.perf_counter() - t0
        try:
            t0 = time.perf_counter()
            remote = asyncio.run(
                run_sweep_on_ray(lab, suites, spaces, cache_dir=tmp / f"cache_{w}", workers=w, progress=False)
            )
            t_ray = time.perf_counter() - t0
            same = all(_same_metrics(a, b) for a, b in zip(local.rows, remote.rows))
            pids = len({r["worker_pid"] for r in remote.rows})
            print(
                f"ray {w} worker(s), pipeline (Tune trials): cluster start {t_start:.1f} s; sweep {t_ray:.1f} s, "
                f"{n_evals / t_ray:.1f} evaluations/s (in-process/ray time = {t_local / t_ray:.2f}x); "
                f"{pids} worker processes; same metrics: {same}"
            )
            t0 = time.perf_counter()
            remote_fast = asyncio.run(
                run_sweep_on_ray(
                    lab, suites, spaces, cache_dir=tmp / f"cache_f{w}", workers=w, progress=False, fast=True, check=1
                )
            )
            t_rf = time.perf_counter() - t0
            same = all(_same_metrics(a, b) for a, b in zip(local_fast.rows, remote_fast.rows))
            print(
                f"ray {w} worker(s), fast evaluator (tasks per chunk of configs): sweep {t_rf:.1f} s, "
                f"{n_evals / t_rf:.1f} evaluations/s (in-process fast/ray fast time = {t_fast / t_rf:.2f}x); "
                f"same metrics: {same}"
            )
            if w == workers[0]:
                n_noop = 6
                store = tempfile.mkdtemp(prefix="rag_lab_tune_")
                t0 = time.perf_counter()
                tune.Tuner(
                    tune.with_resources(_noop_trial, {"cpu": 1}),
                    param_space={"i": tune.grid_search(list(range(n_noop)))},
                    tune_config=tune.TuneConfig(max_concurrent_trials=1, reuse_actors=True),
                    run_config=tune.RunConfig(storage_path=store, verbose=0),
                ).fit()
                per_trial = (time.perf_counter() - t0) / n_noop
                shutil.rmtree(store, ignore_errors=True)

                @ray.remote
                def noop(i: int) -> int:
                    return i

                ray.get([noop.remote(i) for i in range(20)])  # start the worker processes
                n_tasks = 300
                t0 = time.perf_counter()
                ray.get([noop.remote(i) for i in range(n_tasks)])
                per_task = (time.perf_counter() - t0) / n_tasks
                print(
                    f"overhead on this cluster: {per_trial:.2f} s per no-op Tune trial (1 at a time, actors reused), "
                    f"{per_task * 1e3:.2f} ms per no-op task ({n_tasks} in flight)"
                )
        finally:
            conn.close()
    lab.workspace.close()
    shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("all", "milvus", "ray", "replicas"), default="all")
    ap.add_argument("--docs", type=int, default=3000, help="synthetic chunks for the Milvus part")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--tenancy", default="partition_key", help="engine.tenancy of the Milvus part")
    ap.add_argument("--configs", type=int, default=6, help="grid size for the Ray part")
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--hotpot-docs", type=int, default=60)
    ap.add_argument("--workers", type=int, nargs="+", default=[2], help="cluster sizes to measure, e.g. 1 2")
    ap.add_argument("--asks", type=int, default=160, help="asks per round for the replicas part")
    ap.add_argument("--concurrency", type=int, default=8, help="asks in flight for the replicas part")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.part in ("all", "milvus"):
        bench_milvus(args.docs, args.queries, args.tenancy)
    if args.part in ("all", "ray"):
        bench_ray(args.configs, args.questions, args.hotpot_docs, args.workers)
    if args.part in ("all", "replicas"):
        from replicas import bench_replicas

        bench_replicas(args.asks, args.concurrency)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
