"""Scoring: every sample on every metric (:func:`ascore_samples`, :func:`score_samples`), failures
kept as NaN with their reasons and counted."""

from __future__ import annotations

import asyncio
import logging
import math
import warnings
from collections.abc import Sequence
from typing import Any

from rag_lab.eval.ragas_adapter.judge import JudgeConfig, judge_summary
from rag_lab.eval.ragas_adapter.samples import (
    ALL_METRICS,
    LLM_METRICS,
    OFFLINE_METRICS,
    RagasError,
    RagasResult,
    RagasSample,
    _MissingInput,
)
from rag_lab.eval.ragas_adapter.scorers import _clamp, _import_ragas, _llm_scorers, _offline_scorers


class _NoContextNotice(logging.Filter):
    """ragas' ID-based context precision logs a warning for each sample with no retrieved context
    ids; the score is NaN and recorded with its reason here, so the notice is dropped while
    rag_lab scores (only that message, only that logger)."""

    LOGGER = "ragas.metrics._context_precision"

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        return "No retrieved context IDs" not in record.getMessage()


def _check_metric_names(metrics: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(metrics))
    unknown = [m for m in names if m not in ALL_METRICS]
    if unknown:
        raise RagasError(f"unknown ragas metric(s) {', '.join(unknown)}; known: {', '.join(ALL_METRICS)}")
    return names


async def ascore_samples(
    samples: Sequence[RagasSample],
    metrics: Sequence[str] = OFFLINE_METRICS,
    judge: JudgeConfig | None = None,
    embedder: Any = None,
    ledger: Any = None,
) -> RagasResult:
    """Score every sample on every metric (see the package docstring for names and policies).

    With LLM metrics every judge HTTP attempt is recorded in ``ledger`` (a fresh
    :class:`~rag_lab.observability.ledger.Ledger` when None) and summed in ``RagasResult.judge``."""
    names = _check_metric_names(metrics)
    llm_wanted = [m for m in names if m in LLM_METRICS]
    if llm_wanted and judge is None:
        raise RagasError(
            f"LLM metric(s) {', '.join(llm_wanted)} need a judge: set models.judge in the lab config "
            "or pass a JudgeConfig"
        )
    _import_ragas()
    scorers = _offline_scorers() if any(m not in LLM_METRICS for m in names) else {}
    if llm_wanted:
        assert judge is not None
        if ledger is None:
            from rag_lab.observability.ledger import Ledger

            ledger = Ledger()
        scorers.update(_llm_scorers(judge, embedder, llm_wanted, ledger))
    values: dict[str, list[float]] = {m: [math.nan] * len(samples) for m in names}
    reasons: dict[str, dict[str, str]] = {m: {} for m in names}
    failed: dict[str, list[str]] = {m: [] for m in names}
    sem = asyncio.Semaphore(judge.concurrency if judge else 1)

    async def one(metric: str, i: int, s: RagasSample) -> None:
        fn = scorers[metric]
        try:
            if metric in LLM_METRICS:
                async with sem:
                    v = _clamp(await fn(s))
            else:
                v = _clamp(await fn(s))
        except _MissingInput as exc:
            reasons[metric][s.qid] = f"missing input: {exc}"
            failed[metric].append(s.qid)
            return
        except Exception as exc:  # a metric or judge failure: NaN, counted, with the reason
            reasons[metric][s.qid] = f"{type(exc).__name__}: {str(exc)[:300]}"
            failed[metric].append(s.qid)
            return
        values[metric][i] = v
        if not math.isfinite(v):
            reasons[metric][s.qid] = "the metric returned NaN"

    notice, quiet = logging.getLogger(_NoContextNotice.LOGGER), _NoContextNotice()
    notice.addFilter(quiet)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            for metric in names:
                if metric in LLM_METRICS:
                    await asyncio.gather(*(one(metric, i, s) for i, s in enumerate(samples)))
                else:
                    for i, s in enumerate(samples):
                        await one(metric, i, s)
    finally:
        notice.removeFilter(quiet)
    for m in names:
        order = {s.qid: i for i, s in enumerate(samples)}
        failed[m].sort(key=lambda q: order.get(q, 0))
    return RagasResult(
        names,
        [s.qid for s in samples],
        values,
        {m: r for m, r in reasons.items() if r},
        {m: f for m, f in failed.items() if f},
        judge_summary(ledger) if llm_wanted else {},
    )


def score_samples(
    samples: Sequence[RagasSample],
    metrics: Sequence[str] = OFFLINE_METRICS,
    judge: JudgeConfig | None = None,
    embedder: Any = None,
    ledger: Any = None,
) -> RagasResult:
    """Synchronous :func:`ascore_samples` (also inside Jupyter's running loop)."""
    from rag_lab.asyncutil import run_sync

    return run_sync(lambda: ascore_samples(samples, metrics, judge, embedder, ledger))
