"""Running sweeps: the per-config evaluator (stage cache, BM25 index settings) and the grid /
optuna drivers."""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, Unpack

from rag_lab.eval.sweep.outputs import SweepResult
from rag_lab.eval.sweep.specs import (
    _DEFAULT_BM25,
    INDEX_PARAMS,
    ParamSpace,
    RunOptions,
    SweepError,
    SweepOptions,
    grid_configs,
    objective_direction,
)

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.progress import ProgressBar
    from rag_lab.eval.runner import EvalResult
    from rag_lab.eval.suite_spec import SuiteSpec
    from rag_lab.eval.sweep.fast import FastSweep
    from rag_lab.lab.lab import Lab

    #: a suite as the sweeps take it: a spec (loaded and ingested) or an ingested ``(dataset, kb)``
    SuiteInput: TypeAlias = SuiteSpec | tuple[Dataset, str]


# --------------------------------------------------------------------------- running


@dataclass
class _Suite:
    name: str
    dataset: Dataset
    kb: str


def _split(config: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    params = {k: v for k, v in config.items() if k not in INDEX_PARAMS}
    index = {k: v for k, v in config.items() if k in INDEX_PARAMS}
    return params, index


class _Evaluator:
    """Evaluates configs on the suites (shared by grid and optuna)."""

    def __init__(
        self,
        lab: Lab,
        suites: Sequence[_Suite],
        objective: str,
        ks: Sequence[int],
        ragas_metrics: Sequence[str],
        base_params: Mapping[str, object],
        cache_dir: str | Path | None,
        pbar: ProgressBar | None,
    ) -> None:
        from rag_lab.eval.ragas_adapter import OFFLINE_METRICS

        self.lab, self.suites, self.objective, self.ks = lab, list(suites), objective, tuple(ks)
        from rag_lab.eval.funnel import parse_funnel_metric

        #: ranked by a gold-funnel metric: rows carry it and the lost-at shares (both paths)
        self.funnel_objective = parse_funnel_metric(objective) is not None
        metrics = list(ragas_metrics)
        if objective in OFFLINE_METRICS and objective not in metrics:
            metrics.append(objective)
        self.ragas_metrics = metrics
        self.base_params = dict(base_params)
        self.pbar = pbar
        self.handle = None
        self.own_handle = False
        self.bm25_cache = None
        if cache_dir is not None:
            from rag_lab.eval.cache import Bm25IndexCache, enable_stage_cache

            already = getattr(lab, "_stage_cache_handle", None)
            self.handle = enable_stage_cache(lab, cache_dir)
            self.own_handle = self.handle is not already
            self.bm25_cache = Bm25IndexCache(self.handle.cache)
        self.rows: list[dict[str, Any]] = []

    def _apply_index(self, index: Mapping[str, Any]) -> None:
        if not index:
            return
        if self.bm25_cache is None:
            from rag_lab.eval.cache import Bm25IndexCache, StageCache

            self.bm25_cache = Bm25IndexCache(StageCache(Path(self.lab.workspace.root) / "stage_cache"))
        from rag_lab.eval.cache import use_bm25_settings

        s = {**_DEFAULT_BM25, **index}
        for suite in self.suites:
            use_bm25_settings(
                self.lab,
                suite.kb,
                self.bm25_cache,
                k1=float(s["bm25_k1"]),
                b=float(s["bm25_b"]),
                method=str(s["bm25_method"]),
            )

    def close(self, restore_index: bool) -> None:
        """Undo what the sweep changed on the lab (stage cache it enabled, swapped BM25 indexes)."""
        if restore_index:
            self.restore_index()
        if self.handle is not None and self.own_handle:
            self.handle.disable()

    def restore_index(self) -> None:
        """Drop the swapped BM25 indexes so the KBs' own are loaded again."""
        ws = self.lab.workspace
        for suite in self.suites:
            ws.use_keyword_index(suite.kb, None)

    async def warm_up(self, config: Mapping[str, object]) -> None:
        """Run ``config`` once unrecorded, so the stage cache is filled before latencies are timed
        (otherwise the first config would carry every cache miss)."""
        from rag_lab.eval.runner import evaluate_lab

        params, index = _split({**self.base_params, **config})
        self._apply_index(index)
        p = self.lab.params.with_changes(**params)
        for suite in self.suites:
            await evaluate_lab(self.lab, suite.dataset, suite.kb, ks=self.ks, progress=False, params=p, keep_runs=False)

    async def evaluate(self, config: Mapping[str, object]) -> dict[str, Any]:
        """Run ``config`` through the full pipeline on every suite and record its row."""
        from rag_lab.eval.sweep.fast import LATENCY_OF_PIPELINE

        row = await self.record(config, await self.pipeline_results(config))
        row["latency_of"] = LATENCY_OF_PIPELINE
        return row

    async def pipeline_results(self, config: Mapping[str, object]) -> list[tuple[_Suite, EvalResult]]:
        """``(suite, EvalResult)`` of ``config`` run through the full pipeline (nothing recorded)."""
        from rag_lab.eval.runner import evaluate_lab

        params, index = _split({**self.base_params, **config})
        try:
            p = self.lab.params.with_changes(**params)
        except ValueError as exc:
            raise SweepError(f"config {dict(config)}: {exc}") from None
        self._apply_index(index)
        results = []
        for suite in self.suites:
            res = await evaluate_lab(
                self.lab, suite.dataset, suite.kb, ks=self.ks, progress=False, params=p, keep_runs=False, pbar=self.pbar
            )
            results.append((suite, res))
        return results

    async def record(
        self, config: Mapping[str, object], results: Sequence[tuple[_Suite, EvalResult]]
    ) -> dict[str, Any]:
        """The row of ``config`` from its per-suite ``(suite, EvalResult)`` (metrics, ragas metrics,
        latency, cost, errors), appended to :attr:`rows`."""
        row: dict[str, Any] = {"config_index": len(self.rows), **dict(config)}
        per_metric: dict[str, list[float]] = {}
        latencies: list[float] = []
        costs: list[float] = []
        tokens: list[float] = []
        errors = fallbacks = nan_samples = 0
        first_error = ""
        outcome = hashlib.sha1()  # every question's final contexts: equal digests = same retrieval
        for suite, res in results:
            summ = dict(res.summary())
            if self.funnel_objective:
                from rag_lab.eval.funnel import funnel_summary
                from rag_lab.tuning.funnel import CHAIN

                names = [self.objective, *(f"funnel.lost_at.{s}" for s in CHAIN), "funnel.kept"]
                summ.update(funnel_summary(res.records, dict.fromkeys(names)))
            if self.ragas_metrics:
                from rag_lab.eval.ragas_adapter import ascore_samples, samples_from_records

                rr = await ascore_samples(samples_from_records(res.records, suite.dataset), self.ragas_metrics)
                summ.update(rr.summary())
                nan_samples += sum(c["n_nan"] + c["n_failed"] for c in rr.counts().values())
            for k, v in summ.items():
                per_metric.setdefault(k, []).append(v)
                if len(self.suites) > 1:
                    row[f"{suite.name}:{k}"] = v
            for r in res.records:
                outcome.update(f"{suite.name}\x1f{r.qid}\x1f{'|'.join(r.context_ids)}\x1e".encode())
            latencies += [r.latency_ms for r in res.records if not r.error]
            costs += [r.cost_usd for r in res.records]
            tokens += [r.tokens_in + r.tokens_out for r in res.records]
            errors += res.errors
            first_error = first_error or next((f"{r.qid}: {r.error}" for r in res.records if r.error), "")
            fallbacks += res.fallbacks
        for k, vs in per_metric.items():
            row[k] = sum(vs) / len(vs) if all(math.isfinite(v) for v in vs) else math.nan
        lat = sorted(latencies)
        row["latency_ms"] = sum(lat) / len(lat) if lat else math.nan
        row["p95_latency_ms"] = lat[min(len(lat) - 1, int(math.ceil(0.95 * len(lat))) - 1)] if lat else math.nan
        # the trial's ledger, per question (the quality-vs-cost Pareto plot reads cost_usd)
        row["cost_usd"] = sum(costs) / len(costs) if costs else math.nan
        row["tokens"] = sum(tokens) / len(tokens) if tokens else math.nan
        row["errors"] = errors
        row["fallbacks"] = fallbacks
        row["nan_samples"] = nan_samples
        row["first_error"] = first_error
        row["contexts_digest"] = outcome.hexdigest()[:16]
        if self.objective not in row:
            raise SweepError(
                f"objective {self.objective!r} is not among the computed metrics "
                f"({', '.join(k for k in row if not k.startswith('config'))})"
            )
        self.rows.append(row)
        return row

    def stats(self) -> dict[str, object]:
        if self.handle is None:
            return {}
        return {k: {"hits": v.hits, "misses": v.misses} for k, v in self.handle.stats().items()}


def _prepare(lab: Lab, suites: Iterable[SuiteInput], progress: bool = True) -> list[_Suite]:
    """Suites as (spec or (dataset, kb)); specs are loaded and ingested."""
    from rag_lab.eval.runner import SuiteSpec, ingest_dataset

    out: list[_Suite] = []
    for s in suites:
        if isinstance(s, SuiteSpec):
            ds = s.load()
            ingest_dataset(lab, ds, s.kb_name, progress=progress)
            out.append(_Suite(s.name, ds, s.kb_name))
        else:
            ds, kb = s
            out.append(_Suite(ds.name, ds, kb))
    if not out:
        raise SweepError("a sweep needs at least one dataset")
    return out


def _fast_sweep(ev: _Evaluator, fast: bool, check: int | str) -> FastSweep | None:
    """The fast path for this sweep, or None (disabled, or the metrics read the answer)."""
    from rag_lab.eval.sweep.fast import FastSweep, fast_path_reason

    if not fast or fast_path_reason(ev.objective, ev.ragas_metrics):
        return None
    return FastSweep(ev, check=check)


def _stats(ev: _Evaluator, fs: FastSweep | None) -> dict[str, object]:
    from rag_lab.eval.sweep.fast import check_description

    stats = ev.stats()
    if fs is not None:
        stats["fast_path"] = {
            "captures": len(fs._groups),
            "capture_s": round(fs.capture_seconds, 2),
            "evaluate_s": round(fs.eval_seconds, 3),
            "checked_configs": list(fs.checked),
            "check_plan": check_description(len(fs.checked), fs.n_configs),  # in words
        }
    return stats


def _finish(
    bar: ProgressBar,
    ev: _Evaluator,
    fs: FastSweep | None,
    spaces: Sequence[ParamSpace],
    objective: str,
    direction: str,
    base_params: Mapping[str, object] | None,
    prepared: Sequence[_Suite],
    t0: float,
) -> SweepResult:
    """The end of a grid / optuna run, also when it failed: close the progress bar, take the cache
    stats, put the lab back (the stage cache it enabled, swapped BM25 indexes); the result."""
    bar.close()
    stats = _stats(ev, fs)
    ev.close(any(s.name in INDEX_PARAMS for s in spaces))
    return SweepResult(
        [s.name for s in spaces],
        objective,
        direction,
        ev.rows,
        dict(base_params or {}),
        [s.name for s in prepared],
        stats,
        time.perf_counter() - t0,
    )


def _bar(total: int, progress: bool, desc: str) -> ProgressBar:
    from tqdm.auto import tqdm

    bar: ProgressBar = tqdm(total=total, desc=desc, unit="q", disable=not progress, smoothing=0.1)
    return bar


def _start(
    lab: Lab, suites: Iterable[SuiteInput], objective: str, o: RunOptions, n_configs: int, desc: str
) -> tuple[list[_Suite], float, ProgressBar, _Evaluator, FastSweep | None]:
    """A sweep's start: the suites prepared, the clock, the progress bar (``n_configs`` × the
    questions), the evaluator and the fast path (None when not taken)."""
    prepared = _prepare(lab, suites, o.progress)
    n_q = sum(len(s.dataset.queries) for s in prepared)
    t0 = time.perf_counter()
    bar = _bar(n_configs * n_q, o.progress, desc)
    ev = _Evaluator(lab, prepared, objective, o.ks, o.ragas_metrics, o.base_params or {}, o.cache_dir, bar)
    return prepared, t0, bar, ev, _fast_sweep(ev, o.fast, o.check)


async def run_grid(
    lab: Lab,
    suites: Iterable[SuiteInput],
    spaces: Sequence[ParamSpace],
    objective: str = "ndcg@10",
    **options: Unpack[SweepOptions],
) -> SweepResult:
    """Evaluate every grid config; ``suites`` are SuiteSpecs or ``(dataset, kb)`` pairs (already
    ingested); ``options``: :class:`SweepOptions`. ``fast`` (default) evaluates the configs with
    the tuning evaluator from inputs captured once per retrieval config; ``check`` re-runs that
    many of the best configs (or ``"all"``) through the full pipeline as an audit
    (:meth:`~rag_lab.eval.sweep.fast.FastSweep.verify`). Objectives that read the answer use the
    full pipeline."""
    direction = objective_direction(objective)
    configs = grid_configs(spaces)
    o = RunOptions(**options)
    prepared, t0, bar, ev, fs = _start(lab, suites, objective, o, len(configs), f"sweep {len(configs)} configs")
    try:
        if fs is None and o.cache_dir is not None and configs:
            bar.set_description_str("sweep: filling the stage cache")
            await ev.warm_up(configs[0])
            bar.set_description_str(f"sweep {len(configs)} configs")
        for cfg in configs:
            row = await (fs.evaluate(cfg) if fs is not None else ev.evaluate(cfg))
            bar.set_postfix_str(f"{objective}={row[objective]:.4f}", refresh=False)
        if fs is not None:
            chosen = fs.select(ev.rows)
            if chosen:
                bar.set_description_str(f"sweep: checking {len(chosen)} configs on the pipeline")
            await fs.verify(chosen)
    finally:
        result = _finish(bar, ev, fs, spaces, objective, direction, o.base_params, prepared, t0)
    return result


async def run_optuna(
    lab: Lab,
    suites: Iterable[SuiteInput],
    spaces: Sequence[ParamSpace],
    n_trials: int,
    objective: str = "ndcg@10",
    *,
    seed: int = 0,
    **options: Unpack[SweepOptions],
) -> SweepResult:
    """``n_trials`` configs chosen by optuna's TPE sampler (seeded), evaluated like the grid
    (fast path and ``check`` included)."""
    try:
        import optuna
    except ImportError:
        raise SweepError("optuna is not installed: pip install 'rag_lab[eval]' (or pip install optuna)") from None
    if n_trials < 1:
        raise SweepError(f"--optuna-trials must be >= 1, got {n_trials}")
    direction = objective_direction(objective)
    o = RunOptions(**options)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="maximize" if direction == "maximize" else "minimize", sampler=optuna.samplers.TPESampler(seed=seed)
    )
    prepared, t0, bar, ev, fs = _start(lab, suites, objective, o, n_trials, f"optuna {n_trials} trials")
    try:
        for i in range(n_trials):
            trial = study.ask()
            cfg = {s.name: s.suggest(trial) for s in spaces}
            if i == 0 and o.cache_dir is not None and fs is None:
                await ev.warm_up(cfg)
            row = await (fs.evaluate(cfg) if fs is not None else ev.evaluate(cfg))
            value = row[objective]
            if math.isfinite(value):
                study.tell(trial, value)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            bar.set_postfix_str(f"{objective}={value:.4f}", refresh=False)
        if fs is not None:
            await fs.verify()
    finally:
        result = _finish(bar, ev, fs, spaces, objective, direction, o.base_params, prepared, t0)
    return result
