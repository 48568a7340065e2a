"""`rag-lab eval` in a new process on an ingested KB (cold), then again in another new process (warm).

Usage: .venv/bin/python benchmarks/cold_eval.py [N] [--workspace DIR] [--baseline] [--sweep]

1. Ingests the bundled HotpotQA corpus (``hotpotqa_hipporag100``, every document) into
   ``DIR/ingested`` (a temporary folder without ``--workspace``; with it, an earlier ingest is
   reused). Ingest also embeds the texts the re-scorer and the answerer will embed (model passages,
   sentences) into the workspace's vector cache.
2. Copies that workspace to a fresh folder, so every run starts from "ingested, never asked".
3. Runs ``rag-lab eval --dataset hotpotqa_hipporag100:N`` there in a new process (cold: only what
   ingest left in the vector cache), then the same command in another new process (warm: the cold
   run's vectors too). ``--baseline`` also runs it on a third copy with ``vector_cache: false``
   (vectors cached in memory only, for one process: the behaviour before the vector cache).
   ``--sweep`` also runs ``rag-lab sweep`` over the same N questions in a new process on another
   fresh copy (two MMR λ values: one capture of the questions, then the fast evaluator) and prints
   ``sweep capture: X s for N questions, cold eval Y s (R× the cold eval)`` — the capture's own
   seconds as the sweep reports them (``fast_path.capture_s``), next to the cold eval's.
4. Asserts identical metrics and per-question results (answers, ranked documents, context ids and
   scores) between the runs, and prints

   ``cold eval: X s/question, warm Y s/question (R× warm)``

   (the eval's own seconds per question, from the report; process start and model load are
   printed separately), questions/s, the texts each run had to embed (rows the vector cache
   gained), and the physical limit on this machine: MiniLM's rate on these N questions times the
   texts that truly need embedding on a KB whose passages were embedded at ingest (the questions).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATASET = "hotpotqa_hipporag100"
TIMING_FIELDS = {"latency_ms", "stage_ms"}


def ingest(root: Path) -> tuple[float, Any]:
    from rag_lab.eval.runner import SuiteSpec, ingest_dataset
    from rag_lab.lab.lab import Lab

    spec = SuiteSpec(DATASET)
    lab = Lab.from_config(workspace=root)
    t0 = time.perf_counter()
    report = ingest_dataset(lab, spec.load(), spec.kb_name)
    seconds = time.perf_counter() - t0
    lab.workspace.close()
    return seconds, report


def cache_rows(root: Path) -> int:
    from rag_lab.models.vector_cache import FILE_NAME, VectorCache

    cache = VectorCache(root / FILE_NAME)
    try:
        return int(cache.stats()["rows"])
    finally:
        cache.close()


def run_eval(root: Path, n: int, name: str, out: Path, config: Path | None = None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "rag_lab.cli"]
    if config is not None:
        cmd += ["--config", str(config)]
    cmd += ["--workspace", str(root), "eval", "--dataset", f"{DATASET}:{n}", "--out", str(out), "--name", name]
    cmd += ["--quiet"]
    before = cache_rows(root) if config is None else 0
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    report = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
    suite = report["suites"][0]
    return {
        "wall": wall,
        "seconds": float(suite["seconds"]),
        "summary": suite["summary"],
        "records": [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in suite["records"]],
        "embedded": (cache_rows(root) - before) if config is None else None,
    }


def run_sweep(root: Path, n: int, out: Path) -> dict[str, Any]:
    """``rag-lab sweep`` over the first ``n`` questions (mmr_lambda 0.5, 0.7) in a new process: the
    capture's seconds (from the sweep's Markdown, which prints its fast-path stats) and the wall."""
    import re

    cmd = [sys.executable, "-m", "rag_lab.cli", "--workspace", str(root), "sweep", "--dataset", f"{DATASET}:{n}"]
    cmd += ["--param", "mmr_lambda=0.5,0.7", "--out", str(out), "--name", "sweep", "--quiet"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    md = (out / "sweep.md").read_text(encoding="utf-8")
    found = re.search(r"'capture_s': ([0-9.]+)", md)
    if found is None:
        sys.exit(f"{out / 'sweep.md'}: no fast_path capture_s in the sweep's stats")
    return {"wall": wall, "capture_s": float(found.group(1))}


def minilm_rate(texts: list[str]) -> float:
    from rag_lab.models.embedding import shared_minilm

    emb = shared_minilm()
    emb.embed(texts[:2])  # warm the session
    t0 = time.perf_counter()
    for t in texts:
        emb.embed([t])
    return len(texts) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=100, help="questions (default 100)")
    ap.add_argument("--workspace", default=None, help="keep the ingested workspace here (reused when present)")
    ap.add_argument("--baseline", action="store_true", help="also run with vector_cache: false")
    ap.add_argument("--sweep", action="store_true", help="also time a sweep's capture of the same questions")
    args = ap.parse_args()
    base = Path(args.workspace) if args.workspace else Path(tempfile.mkdtemp(prefix="cold_eval_"))
    ingested = base / "ingested"
    seconds, report = ingest(ingested)
    print(f"ingest: {report}")
    if report.changed:
        print(f"ingest: {seconds:.1f} s, {report.vectors_added + report.texts_prepared} texts embedded")

    runs: dict[str, dict[str, Any]] = {}
    work = base / "runs"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ingested, work / "ws")
    runs["cold"] = run_eval(work / "ws", args.n, "cold", work / "out")
    runs["warm"] = run_eval(work / "ws", args.n, "warm", work / "out")
    if args.baseline:
        import yaml

        from rag_lab.lab.lab import DEFAULT_CONFIG

        cfg = work / "no_vector_cache.yaml"
        settings = yaml.safe_load(DEFAULT_CONFIG.read_text(encoding="utf-8"))
        cfg.write_text(yaml.safe_dump({**settings, "vector_cache": False}), encoding="utf-8")
        shutil.copytree(ingested, work / "ws_baseline")
        runs["baseline"] = run_eval(work / "ws_baseline", args.n, "baseline", work / "out", config=cfg)

    sweep = None
    if args.sweep:
        shutil.copytree(ingested, work / "ws_sweep")
        sweep = run_sweep(work / "ws_sweep", args.n, work / "out_sweep")
    for name, r in runs.items():
        assert r["summary"] == runs["cold"]["summary"], f"{name}: metrics differ from cold"
        assert r["records"] == runs["cold"]["records"], f"{name}: per-question results differ from cold"
    from rag_lab.eval.datasets import load_dataset

    questions = [q.question for q in load_dataset(DATASET).queries[: args.n]]
    rate = minilm_rate(questions)
    n = len(questions)
    cold, warm = runs["cold"]["seconds"] / n, runs["warm"]["seconds"] / n
    print(f"cold eval: {cold:.3f} s/question, warm {warm:.3f} s/question ({cold / warm:.2f}× warm)")
    for name, r in runs.items():
        emb = "" if r["embedded"] is None else f", {r['embedded']} texts embedded (vector cache rows gained)"
        print(
            f"  {name}: {n / r['seconds']:.2f} questions/s, eval {r['seconds']:.1f} s, process {r['wall']:.1f} s "
            f"(start, model load, report: {r['wall'] - r['seconds']:.1f} s){emb}"
        )
    print(
        f"physical limit: {1 / rate + warm:.3f} s/question cold = the question's embedding ({1 / rate:.3f} s, "
        f"MiniLM {rate:.1f} texts/s on these {n} questions) + the warm pipeline ({warm:.3f} s)"
    )
    if sweep is not None:
        cold_s = runs["cold"]["seconds"]
        print(
            f"sweep capture: {sweep['capture_s']:.1f} s for {n} questions, cold eval {cold_s:.1f} s "
            f"({sweep['capture_s'] / cold_s:.2f}× the cold eval); the sweep's process {sweep['wall']:.1f} s in all"
        )
    print(f"identical metrics and per-question results in {len(runs)} runs: {runs['cold']['summary']}")


if __name__ == "__main__":
    main()
