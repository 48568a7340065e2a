"""Run a dataset's questions through the lab and keep, per query, what retrieval metrics, ragas
metrics and reports need (:class:`QueryRecord`).

A question whose pipeline run raises is not dropped: its record carries the error, it retrieved
nothing, so it scores 0 on every retrieval metric (the metrics' "no results" policy) and counts in
``EvalResult.errors``.

Putting a dataset into the lab (corpus, FAQ, replayed history) is :mod:`rag_lab.eval.ingest`
(re-exported here).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import math
import platform
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.eval.datasets import Dataset
from rag_lab.eval.ingest import _replay_history, dataset_documents, eval_kb_name, faq_kb_name, ingest_dataset
from rag_lab.eval.metrics import RetrievalReport, evaluate_retrieval
from rag_lab.eval.records import QueryRecord, answer_text, failed_funnel, record_from_run
from rag_lab.eval.score_range import ScoreRange, merge_ranges, run_score_range
from rag_lab.eval.suite_spec import SuiteSpec, parse_suite_spec

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import QueryItem
    from rag_lab.eval.progress import ProgressBar
    from rag_lab.eval.ragas_adapter import JudgeConfig
    from rag_lab.eval.report import EvalReport
    from rag_lab.lab.lab import Lab, Run
    from rag_lab.types.params import PipelineParams

DEFAULT_KS = (1, 3, 5, 10)

__all__ = [
    "DEFAULT_KS",
    "EvalResult",
    "QueryRecord",
    "SuiteSpec",
    "answer_text",
    "dataset_documents",
    "eval_kb_name",
    "evaluate_lab",
    "failed_funnel",
    "faq_kb_name",
    "ingest_dataset",
    "params_overrides",
    "parse_suite_spec",
    "write_retrieval_report",
]


@dataclass
class EvalResult:
    """Records and retrieval metrics of one dataset evaluated with one set of params."""

    dataset: str
    kb: str
    report: RetrievalReport
    records: list[QueryRecord] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)
    params: dict[str, object] = field(default_factory=dict)  # overrides of the lab's params
    seconds: float = 0.0
    #: the raw rerank-model scores seen (:func:`rag_lab.eval.score_range.merge_ranges`; None: none)
    rerank_scores: ScoreRange | None = None

    @property
    def mean_latency_ms(self) -> float:
        lat = [r.latency_ms for r in self.records if not r.error]
        return sum(lat) / len(lat) if lat else math.nan

    @property
    def fallbacks(self) -> int:
        return sum(1 for r in self.records if r.is_fallback)

    @property
    def errors(self) -> int:
        return sum(1 for r in self.records if r.error)

    def summary(self) -> dict[str, float]:
        return self.report.summary()

    def funnel_summary(self) -> dict[str, float]:
        """The gold-funnel metrics' means (:mod:`rag_lab.eval.funnel`; empty without funnels)."""
        from rag_lab.eval.funnel import funnel_summary

        return funnel_summary(self.records)


def params_overrides(params: PipelineParams | Mapping[str, object] | None, base: PipelineParams) -> dict[str, object]:
    """The fields of ``params`` that differ from ``base`` (a mapping is returned as a dict)."""
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return dict(params)
    b = base.model_dump()
    return {k: v for k, v in params.model_dump().items() if b.get(k) != v}


async def evaluate_lab(
    lab: Lab,
    dataset: Dataset,
    kb: str,
    n_queries: int | None = None,
    ks: Iterable[int] = DEFAULT_KS,
    progress: bool = True,
    params: PipelineParams | Mapping[str, object] | None = None,
    keep_runs: bool = True,
    pbar: ProgressBar | None = None,
    concurrency: int | None = None,
    keep_sessions: bool = False,
    retrieval_only: bool = False,
) -> EvalResult:
    """Ask each question (no snapshots) and score the final contexts' documents
    (``retrieval_only``: the search stage's output, nothing after it runs).

    ``params`` (a PipelineParams or overrides of the lab's) apply to every question. ``pbar``: an
    open tqdm bar to advance instead of opening one (sweeps share one bar). ``concurrency``: how
    many questions are in flight at once (:func:`default_concurrency` when None): questions are
    independent, so the records, in question order, are the same at any level; a model behind
    HTTP is then used at N requests at a time instead of one. Latencies are each question's own
    wall time, which overlapping questions lengthen. ``keep_sessions``: store each question and
    answer in the lab's ``sessions.sqlite`` as a chat would (off by default: an evaluation is not
    a conversation, and the file grew ~42 KB per question per run; a dataset's replayed history
    is still written, the turns read it).
    """
    queries = dataset.queries[:n_queries] if n_queries else dataset.queries
    p: PipelineParams = lab.params.with_changes(**params) if isinstance(params, Mapping) else (params or lab.params)
    own_bar = None
    if pbar is None and progress:
        from tqdm.auto import tqdm

        own_bar = pbar = tqdm(total=len(queries), desc=f"eval {dataset.name}", unit="q")
    t0 = time.perf_counter()
    runs: dict[str, Run] = {}
    records: list[QueryRecord] = []
    kbs = [kb] + ([faq_kb_name(kb)] if dataset.faq else [])
    titles = {d.id: d.title for d in dataset.corpus}
    n = default_concurrency(lab) if concurrency is None else int(concurrency)
    if n < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency!r}")

    async def one(q: QueryItem) -> tuple[QueryRecord, Run | None, tuple[float, float] | None]:
        turn = len(dataset.history.get(q.id, ())) + 1
        try:
            session = _replay_history(lab, dataset.history[q.id]) if q.id in dataset.history else ""
            run = await lab.aask(
                q.question,
                kb=kbs,
                params=p,
                snapshots=False,
                session_id=session,
                persist=keep_sessions,
                retrieval_only=retrieval_only,
            )
        except Exception as exc:  # the record keeps the failure; the query scores 0
            rec = QueryRecord(
                q.id,
                q.question,
                list(q.gold_ids),
                list(q.answers),
                gold_titles=[titles.get(g, "") for g in q.gold_ids],
                error=f"{type(exc).__name__}: {exc}",
                funnel=failed_funnel(q.gold_ids),
                turn=turn,
            )
            return rec, None, None
        finally:
            if pbar is not None:
                pbar.update(1)
        return record_from_run(q, run, titles, turn), run, run_score_range(run.diagnostics)

    try:
        if n == 1:
            done = [await one(q) for q in queries]
        else:
            gate = asyncio.Semaphore(n)

            async def bounded(q: QueryItem) -> tuple[QueryRecord, Run | None, tuple[float, float] | None]:
                async with gate:
                    return await one(q)

            done = list(await asyncio.gather(*(bounded(q) for q in queries)))
    finally:
        if own_bar is not None:
            own_bar.close()
    for rec, run, _ in done:
        records.append(rec)
        if keep_runs and run is not None:
            runs[rec.qid] = run
    report = evaluate_retrieval(
        {r.qid: r.retrieved_doc_ids for r in records},
        {q.id: set(q.gold_ids) for q in queries},
        ks=ks,
        grades={q.id: q.grades() for q in queries} if any(q.relevance for q in queries) else None,
    )
    return EvalResult(
        dataset=dataset.name,
        kb=kb,
        report=report,
        records=records,
        runs=runs,
        params=params_overrides(p, lab.params),
        seconds=time.perf_counter() - t0,
        rerank_scores=merge_ranges(r for _, _, r in done),
    )


#: questions in flight at once when a model of the lab answers over HTTP (I/O-bound)
REMOTE_CONCURRENCY = 8


def default_concurrency(lab: Lab) -> int:
    """1 when every model of the lab runs in this process (CPU-bound: overlapping questions only
    share the same cores), else :data:`REMOTE_CONCURRENCY`. A lab config's ``eval.concurrency``
    wins."""
    from rag_lab.models.timeouts import is_in_process

    configured = ((getattr(lab, "config", None) or {}).get("eval") or {}).get("concurrency")
    if configured is not None:
        if isinstance(configured, bool) or not isinstance(configured, int) or configured < 1:
            raise ValueError(f"eval.concurrency: expected an integer >= 1, got {configured!r}")
        return configured
    models = [getattr(lab, name, None) for name in ("embedder", "reranker", "chat_model")]
    return 1 if all(m is None or is_in_process(m) for m in models) else REMOTE_CONCURRENCY


def write_retrieval_report(
    result: EvalResult, out_dir: str | Path, name: str, extra: Mapping[str, object] | None = None
) -> list[Path]:
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
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        **(extra or {}),
    }
    jpath = out / f"{name}.json"
    jpath.write_text(
        json.dumps({"meta": meta, "summary": summary}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
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


# --------------------------------------------------------------------------- suites


async def evaluate_suites(
    lab: Lab,
    specs: Iterable[SuiteSpec],
    params: PipelineParams | Mapping[str, object] | None = None,
    ragas_metrics: Iterable[str] = (),
    judge: JudgeConfig | None = None,
    ks: Iterable[int] = DEFAULT_KS,
    progress: bool = True,
    meta: Mapping[str, object] | None = None,
    concurrency: int | None = None,
    keep_sessions: bool = False,
    judge_repeats: int = 1,
    loaded: Sequence[tuple[str, Dataset, str]] | None = None,
    retrieval_only: bool = False,
) -> EvalReport:
    """Ingest and evaluate each suite with one config; returns an :class:`~rag_lab.eval.report.EvalReport`
    whose ``meta["spec"]`` can reproduce the run (the gate re-runs it). ``keep_sessions``: see
    :func:`evaluate_lab`. ``judge_repeats``: score each sample that many times on the LLM metrics
    (:func:`~rag_lab.eval.ragas_adapter.ascore_repeated`; the spec records it when > 1).
    ``loaded``: ``(suite name, dataset, KB name)`` of knowledge bases already built (``rag-lab
    eval --kb``), evaluated as they are: nothing is ingested, and the spec names no suite to re-run."""
    from rag_lab.eval.report import EvalReport, SuiteResult

    spec_list = list(specs)
    todo: list[tuple[str, Any, str, SuiteSpec | None]] = [(s.name, None, s.kb_name, s) for s in spec_list]
    todo += [(name, ds, kb, None) for name, ds, kb in loaded or ()]
    names = [t[0] for t in todo]
    if len(set(names)) != len(names):
        raise ValueError(f"suite names must be unique, got {names}")
    metrics = list(ragas_metrics)
    ks_t = tuple(ks)
    suites: list[SuiteResult] = []
    datasets: list[tuple[str, Dataset]] = []
    score_ranges: dict[str, ScoreRange | None] = {}
    for name, ds, kb_name, spec in todo:
        if spec is not None:
            ds = spec.load()
            ingest_dataset(lab, ds, kb_name, progress=progress)
        datasets.append((name, ds))
        res = await evaluate_lab(
            lab,
            ds,
            kb_name,
            ks=ks_t,
            progress=progress,
            params=params,
            keep_runs=False,
            keep_sessions=keep_sessions,
            concurrency=concurrency,
            retrieval_only=retrieval_only,
        )
        score_ranges[name] = res.rerank_scores
        ragas = None
        suite_metrics = spec.ragas_metrics if spec is not None and spec.ragas_metrics is not None else metrics
        if suite_metrics:
            from rag_lab.eval.ragas_adapter import ascore_repeated, samples_from_records
            from rag_lab.observability.ledger import Ledger

            ragas = await ascore_repeated(
                samples_from_records(res.records, ds),
                suite_metrics,
                judge,
                judge_repeats,
                embedder=getattr(lab, "embedder", None),
                ledger=Ledger(getattr(lab, "prices", None) or Ledger().prices),
            )
        suites.append(
            SuiteResult(
                name,
                ds.name,
                kb_name,
                spec.to_dict() if spec is not None else {"name": name, "kb": kb_name, "queries": str(ds.path)},
                res.params,
                res.report,
                res.records,
                ragas,
                res.seconds,
            )
        )
    run_spec = {
        "suites": [s.to_dict() for s in spec_list],
        "ks": list(ks_t),
        "ragas_metrics": metrics,
        "params": params_overrides(params, lab.params) if params is not None else {},
        **({"judge_repeats": judge_repeats} if judge_repeats > 1 else {}),
        **({"retrieval_only": True} if retrieval_only else {}),
    }
    lab_params = lab.params.model_dump(mode="json") if hasattr(lab.params, "model_dump") else {}
    from rag_lab.eval.gate.provenance import report_provenance

    provenance = report_provenance(lab, datasets)
    provenance["rerank_scores"] = score_ranges  # per suite, with models.reranker: the scale thresholds mean
    return EvalReport(
        suites, {"spec": run_spec, "lab_params": lab_params, "provenance": provenance, **dict(meta or {})}
    )
