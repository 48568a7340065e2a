"""Generated test sets vs the human one: offline generation speed, and whether a generated set ranks
pipeline configs as the human questions of the same corpus do.

Usage: .venv/bin/python benchmarks/testset.py [N_QUESTIONS] [MAX_DOCS] [N_GENERATED] [MULTIHOP]

One HotpotQA slice (``hotpotqa_hipporag100``, default 50 human questions, their gold documents
plus distractors up to 200 documents) is ingested once with the default offline lab. Then:

* ``rag-lab testset``'s offline generator writes N_GENERATED (default 100) questions from that KB,
  a share MULTIHOP of them two-document questions as far as the KB's links allow (default: the
  human set's own share of questions with two gold documents, 1.0 on HotpotQA; the command's
  default is 0.25) (timed: questions kept per second, the findability check and the saturation
  measurement included);
* both question sets are captured once (one pipeline run per question) and a grid of
  rerank_threshold × mmr_lambda × rerank_top_k (3 × 2 × 2 = 12 configs) is evaluated on each with
  the fast evaluator (``rag_lab.tuning``, as ``rag-lab sweep`` does);
* the default pipeline's retrieval metrics and saturation (:mod:`rag_lab.eval.saturation`) on
  each set, and the rank correlation (Spearman ρ, Kendall τ, scipy) of the 12 configs ordered by
  nDCG@10 on the generated set vs the human set;
* the two goals a generated set should meet, each said met or not: the default pipeline's
  recall@10 on it at most 0.95 (not saturated) and ρ at least 0.8 (it ranks configs as the human
  set does).

The human questions are two-hop (two gold documents each); the generator makes only as many
two-document questions as the KB's links give it, the rest have one gold document, so their
absolute scores differ by construction; the correlation says whether the cheaper set would pick
the same configs.

Last line, for scripts: ``testset: ...`` (the headline).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau, spearmanr

from rag_lab.eval.runner import SuiteSpec, ingest_dataset
from rag_lab.eval.saturation import saturation, saturation_line
from rag_lab.eval.sweep.fast import RetrievalMemo
from rag_lab.eval.testset import build_testset
from rag_lab.lab import Lab
from rag_lab.tuning import FastEvaluator, doc_ids
from rag_lab.tuning.capture import CaptureQuestion, acapture_questions

GRID = [
    {"rerank_threshold": t, "mmr_lambda": m, "rerank_top_k": k}
    for t, m, k in itertools.product((0.2, 0.35, 0.5), (0.5, 0.9), (5, 10))
]
SHOWN = ("recall@5", "recall@10", "ndcg@10", "mrr")
RANK_BY = "ndcg@10"
MAX_RECALL = 0.95
MIN_RHO = 0.8


async def grid_metrics(
    lab: Lab, kb: str, queries: list[Any]
) -> tuple[dict[str, float], list[dict[str, float]], float, str]:
    """(default-config metrics, per-config metrics of GRID, capture seconds, the default config's
    saturation line) for ``queries``."""
    t0 = time.perf_counter()
    inputs = await acapture_questions(lab, [CaptureQuestion(q.id, q.question) for q in queries], kb)
    capture_s = time.perf_counter() - t0
    fe = FastEvaluator(inputs, lab.params)
    memo = RetrievalMemo({q.id: set(q.gold_ids) for q in queries})

    def score(cfg: dict[str, Any]) -> dict[str, float]:
        refs = fe.evaluate(cfg)
        return memo.report({qid: doc_ids(r) for qid, r in refs.items()}).summary()

    default = memo.report({qid: doc_ids(r) for qid, r in fe.evaluate({}).items()})
    sat = saturation({m: [float(row[m]) for row in default.rows] for m in default.metric_names})
    return score({}), [score(cfg) for cfg in GRID], capture_s, saturation_line(sat)


async def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    max_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    n_gen = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    spec = SuiteSpec("hotpotqa_hipporag100", n, max_docs)
    human = spec.load()
    two_doc = sum(len(q.gold_ids) > 1 for q in human.queries) / len(human.queries)
    multihop = float(sys.argv[4]) if len(sys.argv) > 4 else two_doc
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab.from_config(workspace=Path(tmp) / "ws")
        t0 = time.perf_counter()
        ingest_dataset(lab, human, spec.kb_name)
        ingest_s = time.perf_counter() - t0
        build_testset(lab, spec.kb_name, 3, Path(tmp) / "warm", seed=1)  # warm-up: jieba, embedder
        t0 = time.perf_counter()
        gen, report = build_testset(lab, spec.kb_name, n_gen, Path(tmp) / "gen", seed=0, multihop=multihop)
        gen_s = time.perf_counter() - t0
        h_default, h_grid, h_cap, h_sat = await grid_metrics(lab, spec.kb_name, list(human.queries))
        g_default, g_grid, g_cap, g_sat = await grid_metrics(lab, spec.kb_name, list(gen.queries))
    qps = report.kept / gen_s
    hx = [m[RANK_BY] for m in h_grid]
    gx = [m[RANK_BY] for m in g_grid]
    rho = spearmanr(hx, gx).statistic
    tau = kendalltau(hx, gx).statistic
    best_h = max(range(len(GRID)), key=lambda i: (hx[i], -i))
    best_g = max(range(len(GRID)), key=lambda i: (gx[i], -i))

    print(
        f"HotpotQA slice: {len(human.queries)} human questions, {len(human.corpus)} documents "
        f"(ingested in {ingest_s:.1f} s)"
    )
    print(f"offline generation: {report.kept} questions in {gen_s:.2f} s = {qps:.1f} questions/s; {report}")
    print(
        f"two-document questions: share asked {multihop:.2f} (human set {two_doc:.2f}), "
        f"kept {report.multihop} of {report.kept}"
    )
    print(f"capture (one pipeline run per question): human {h_cap:.1f} s, generated {g_cap:.1f} s")
    print(f"default pipeline: {'set':<12}" + "".join(f"{m:>11}" for m in SHOWN))
    for name, m in (("human", h_default), ("generated", g_default)):
        print(f"                  {name:<12}" + "".join(f"{m[k]:>11.3f}" for k in SHOWN))
    print(f"human     {h_sat}")
    print(f"generated {g_sat}")
    print(f"{len(GRID)} configs (rerank_threshold, mmr_lambda, rerank_top_k), {RANK_BY}:  human | generated")
    for cfg, a, b in zip(GRID, hx, gx, strict=True):
        print(f"  {cfg['rerank_threshold']:<5} {cfg['mmr_lambda']:<4} {cfg['rerank_top_k']:<3}  {a:.3f} | {b:.3f}")
    print(f"best config: human {GRID[best_h]}, generated {GRID[best_g]}")
    nan = "n/a (constant ranking)"
    rho_s = nan if math.isnan(rho) else f"{rho:.2f}"
    tau_s = nan if math.isnan(tau) else f"{tau:.2f}"
    recall_ok = g_default["recall@10"] <= MAX_RECALL
    rho_ok = not math.isnan(rho) and rho >= MIN_RHO
    print(
        f"goals: generated recall@10 {g_default['recall@10']:.3f} <= {MAX_RECALL} {'met' if recall_ok else 'NOT met'}; "
        f"Spearman ρ {rho_s} >= {MIN_RHO} {'met' if rho_ok else 'NOT met'}"
    )
    print(
        f"testset: offline {qps:.1f} questions/s ({report.kept} kept of {n_gen}); default pipeline ndcg@10 "
        f"human {h_default['ndcg@10']:.3f} vs generated {g_default['ndcg@10']:.3f}, recall@10 "
        f"{h_default['recall@10']:.3f} vs {g_default['recall@10']:.3f}; {len(GRID)}-config ranking by "
        f"{RANK_BY}: Spearman ρ {rho_s}, Kendall τ {tau_s}"
    )


if __name__ == "__main__":
    asyncio.run(main())
