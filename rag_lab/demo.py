"""`make demo`: ingest a bundled dataset, answer a few questions through the whole pipeline with
the answer streamed to the terminal, then score retrieval on a slice of the dataset and write a
report under ``reports/``. Offline: every model runs on this machine."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from rag_lab.eval.datasets import load_dataset
from rag_lab.eval.runner import evaluate_lab, write_retrieval_report
from rag_lab.lab.lab import Lab
from rag_lab.prompts.templates import REPO_ROOT
from rag_lab.stream.bus import BusEvent, BusEventType

if TYPE_CHECKING:
    from rag_lab.knowledge.ingest_common import IngestReport

DATASET = "hotpotqa_hipporag100"
KB = "hotpotqa"


_answering = {"started": False}


#: documents of the quick demo KB `make lab` ingests on a first start (seconds, not minutes)
QUICK_DOCS = 50
#: the slice keeps the gold documents of at most this many of the first queries
SLICE_QUERIES = 20


def check_demo_docs(max_docs: int | None) -> None:
    """Refuse a slice size that is not a whole number >= 1 (``None``: the whole corpus)."""
    if max_docs is not None and (isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1):
        raise ValueError(f"the demo slice needs a whole number of documents >= 1, got {max_docs!r}")


def demo_documents(max_docs: int | None = None) -> list[dict[str, object]]:
    """The demo corpus as ingestable dicts (``max_docs``: a slice keeping the gold documents of
    as many of the first queries as fit, up to 20, for quick starts and tests; any ``max_docs >= 1``
    works, a slice smaller than the first query's gold documents keeps the first of them)."""
    check_demo_docs(max_docs)
    ds = load_dataset(DATASET)
    if max_docs is not None and max_docs < len(ds.corpus):
        gold: set[str] = set()
        n = 0
        for q in ds.queries[:SLICE_QUERIES]:
            if len(gold | set(q.gold_ids)) > max_docs:
                break
            gold |= set(q.gold_ids)
            n += 1
        if n:
            ds = ds.subset(n, max_docs=max_docs)
        else:  # fewer documents than the first question's gold: the first of those
            keep = set(ds.queries[0].gold_ids[:max_docs])
            ds = replace(ds, corpus=[d for d in ds.corpus if d.id in keep])
    return [{"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata} for d in ds.corpus]


def demo_kb_size(lab: Lab) -> int:
    """Documents the demo knowledge base holds now (0: missing or empty)."""
    for kb in lab.workspace.list_kbs():
        if kb.name == KB and lab.workspace.store.count_chunks(kb.id) > 0:
            return len(lab.workspace.store.list_knowledge(kb.id))
    return 0


def ensure_demo_kb(lab: Lab, max_docs: int | None = None, progress: bool = True) -> IngestReport | None:
    """Make the knowledge base ``hotpotqa`` hold the demo corpus (``max_docs``: a slice of it,
    see :func:`demo_documents`): ingests the wanted documents it lacks unless it already holds at
    least as many. ``ensure_demo_kb(lab)`` after a quick start adds the rest of the corpus.
    Returns the ingest report, or ``None`` when the KB was ready."""
    wanted = demo_documents(max_docs)
    held: set[str] = set()
    for kb in lab.workspace.list_kbs():
        if kb.name == KB and lab.workspace.store.count_chunks(kb.id) > 0:
            held = {k.id for k in lab.workspace.store.list_knowledge(kb.id)}
    if held and len(held) >= len(wanted):
        return None
    return lab.ingest_documents([d for d in wanted if d["id"] not in held], kb=KB, progress=progress)


def _printer(ev: BusEvent) -> None:
    if ev.type == BusEventType.FINAL_ANSWER:
        if not _answering["started"]:
            _answering["started"] = True
            sys.stdout.write("A: ")
        sys.stdout.write(str(ev.data.get("content", "")))
        sys.stdout.flush()
    elif ev.type == BusEventType.TOOL_RESULT and ev.data.get("output"):
        print(f"  · {ev.data.get('tool_name')}: {ev.data.get('output')}")


async def main() -> int:
    n_eval = int(os.environ.get("RAG_LAB_DEMO_QUERIES", "40"))
    print("rag_lab demo — offline models: MiniLM-L6 int8 embeddings, embedding re-scorer, extractive answerer\n")
    lab = Lab.from_config()
    ds = load_dataset(DATASET)
    t0 = time.perf_counter()
    report = lab.ingest_documents(demo_documents(), kb=KB)
    print(f"Ingested {DATASET}: {report} ({time.perf_counter() - t0:.1f} s)\n")

    for q in ds.queries[:3]:
        print(f"Q: {q.question}")
        _answering["started"] = False
        run = await lab.aask(q.question, kb=KB, on_event=_printer, snapshots=False)
        print()
        cited = set(run.cited_chunk_ids)
        print("References:")
        for i, r in enumerate(run.references[:5], 1):
            mark = "cited" if r.id in cited else "     "
            gold = "gold" if r.knowledge_id in q.gold_ids else "    "
            print(f"  [{i}] {mark} {gold} {r.score:.3f}  {r.knowledge_title}")
        print(f"Expected: {', '.join(q.answers)} | gold docs: {', '.join(ds.doc(g).title for g in q.gold_ids)}")
        print(f"Stages: {' → '.join(f'{t.event} {t.duration_ms:.0f}ms' for t in run.timings)}\n")

    print(f"Scoring retrieval on the first {n_eval} questions of {DATASET} …")
    result = await evaluate_lab(lab, ds, KB, n_queries=n_eval)
    paths = write_retrieval_report(
        result, REPO_ROOT / "reports", "demo_retrieval", extra={"params": "config/lab.yaml defaults"}
    )
    for k, v in result.summary().items():
        if k.startswith(("recall@", "ndcg@", "hit@")) or k in ("mrr", "map"):
            print(f"  {k:>12}: {v:.4f}")
    print(f"Report: {', '.join(str(p.relative_to(REPO_ROOT)) for p in paths)}")
    return 0


def run() -> int:
    """``make demo``: Ctrl-C stops it with one line and exit code 130, as every ``rag-lab`` command
    (the ingest keeps the documents it finished)."""
    from rag_lab.cliutil import INTERRUPTED_EXIT, first_ctrl_c_stops

    try:
        with first_ctrl_c_stops():
            return asyncio.run(main())
    except KeyboardInterrupt:
        print("rag-lab demo: interrupted (Ctrl-C); what had finished is kept", file=sys.stderr)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    raise SystemExit(run())
