"""Run a dataset's questions through the lab and score what was retrieved (first cut; the
evaluation issue adds ragas, the stage cache, sweeps and the gate)."""
from __future__ import annotations

import datetime as _dt
import json
import math
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.eval.datasets import Dataset
from rag_lab.eval.metrics import RetrievalReport, evaluate_retrieval

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab, Run

DEFAULT_KS = (1, 3, 5, 10)


@dataclass
class EvalResult:
    dataset: str
    kb: str
    report: RetrievalReport
    runs: dict[str, "Run"] = field(default_factory=dict)
    mean_latency_ms: float = 0.0
    fallbacks: int = 0
    errors: int = 0

    def summary(self) -> dict[str, float]:
        return self.report.summary()


async def evaluate_lab(
    lab: "Lab", dataset: Dataset, kb: str, n_queries: int | None = None, ks=DEFAULT_KS, progress: bool = True
) -> EvalResult:
    """Ask each question (sequentially, no snapshots) and score the final contexts' documents."""
    from tqdm.auto import tqdm

    queries = dataset.queries[:n_queries] if n_queries else dataset.queries
    runs: dict[str, Any] = {}
    for q in tqdm(queries, desc=f"eval {dataset.name}", unit="q", disable=not progress):
        runs[q.id] = await lab.aask(q.question, kb=kb, snapshots=False)
    report = evaluate_retrieval(
        {qid: r.retrieved_doc_ids for qid, r in runs.items()},
        {q.id: set(q.gold_ids) for q in queries},
        ks=ks,
    )
    lat = [r.total_ms for r in runs.values()]
    return EvalResult(
        dataset=dataset.name,
        kb=kb,
        report=report,
        runs=runs,
        mean_latency_ms=sum(lat) / len(lat) if lat else math.nan,
        fallbacks=sum(1 for r in runs.values() if r.is_fallback),
        errors=sum(1 for r in runs.values() if r.error),
    )


def write_retrieval_report(result: EvalResult, out_dir: str | Path, name: str, extra: dict[str, Any] | None = None) -> list[Path]:
    """``<name>.json`` (machine-readable) and ``<name>.md`` (a table for people)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = result.summary()
    meta = {
        "dataset": result.dataset,
        "kb": result.kb,
        "queries": result.report.n_queries,
        "excluded_queries": list(result.report.excluded_queries),
        "mean_latency_ms": round(result.mean_latency_ms, 1),
        "fallback_answers": result.fallbacks,
        "errors": result.errors,
        "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        **(extra or {}),
    }
    jpath = out / f"{name}.json"
    jpath.write_text(json.dumps({"meta": meta, "summary": summary}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    lines = [
        f"# Retrieval report: {result.dataset}",
        "",
        f"{meta['queries']} queries on knowledge base `{result.kb}`; mean latency {meta['mean_latency_ms']} ms per question; "
        f"{meta['fallback_answers']} fallback answers; {meta['errors']} errors.",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| {k} | {v:.4f} |" for k, v in summary.items()],
        "",
        "Ranked list scored: the documents of the final contexts (after rerank, merge and top-K), each once.",
        "",
    ]
    mpath = out / f"{name}.md"
    mpath.write_text("\n".join(lines), encoding="utf-8")
    return [jpath, mpath]
