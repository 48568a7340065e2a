"""Sweeps on a Ray cluster: the same grid or optuna search, one Ray Tune trial per config (or,
with the fast evaluator, Ray tasks scoring chunks of configs from stage inputs captured once).

``run_sweep_on_ray`` evaluates exactly what :func:`~rag_lab.eval.sweep.run_grid` /
:func:`~rag_lab.eval.sweep.run_optuna` evaluate, with the same per-config evaluator, so a config
gets the same metrics either way (latency aside). What changes is where configs run:

* the driver prepares the suites (loads and ingests the datasets) and, with the stage cache on,
  runs one unrecorded warm-up config to fill the cache, as the in-process sweep does;
* the workspace (SQLite store, indexes) and the stage cache are packed once and put **once** in
  the Ray object store (``tune.with_parameters``), with the lab config, the datasets and the
  evaluator settings. Each worker process unpacks them into its own temporary folder and builds
  one lab of the driver's lab class (shipped by reference) from the same config, reused by every
  trial it runs. Nothing
  needs a shared file system, so the same code runs on a laptop and on a KubeRay cluster;
* the grid becomes ``tune.grid_search`` over the config indices (same configs, same order); an
  optuna search becomes Ray Tune's ``OptunaSearch`` (TPE, seeded) with the same parameter
  spaces. With several trials in flight, TPE proposes configs from fewer finished trials than the
  sequential search, so an optuna run on Ray visits other configs than in-process (each one still
  scored identically).

``ray_address``: ``None`` / ``"local"`` starts a local cluster of ``workers`` CPUs for the run
(shut down afterwards), ``"auto"`` joins the cluster this machine belongs to, ``"ray://head:10001"``
connects a Ray client. A cluster that was already initialised in this process (a notebook) is
used as is and left running.

With ``fast=True`` a grid whose metrics read no answer takes the fast path
(:func:`_fast_grid_on_ray`): captures in the driver, shipped in the payload without their SQLite
handles, Ray tasks per chunk of configs, the ``check`` best configs re-scored by the driver and
re-run on the full pipeline.

Ray costs time before any evaluation: starting a local cluster (seconds), and per Tune trial an
actor plus bookkeeping (~1-3 s measured by ``benchmarks/scale_out.py``). :func:`choose_executor`
keeps small sweeps in-process and says why.

This module is the driver; :mod:`rag_lab.eval.sweep.ray_cluster` chooses the executor and
connects to Ray, :mod:`rag_lab.eval.sweep.ray_worker` holds what runs in the workers (both
re-exported here).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.eval.sweep.outputs import SweepResult
from rag_lab.eval.sweep.ray_cluster import (
    DEFAULT_MIN_CONFIGS,
    FAST_MIN_FACTOR,
    ExecutorChoice,
    RayConnection,
    RayUnavailable,
    choose_executor,
    init_ray,
    ray_available,
    remote_cause,
)
from rag_lab.eval.sweep.ray_worker import (
    _SKIP,
    SweepPayload,
    _evaluate_chunk_task,
    _ship_fast_inputs,
    _trainable,
    check_code_version,
    code_version,
    evaluate_chunk_in_worker,
    evaluate_in_worker,
    pack_folder,
    unpack_folder,
)
from rag_lab.eval.sweep.runners import _Evaluator, _prepare, _Suite
from rag_lab.eval.sweep.specs import INDEX_PARAMS, ParamSpace, ParamValue, SweepError, grid_configs, objective_direction

if TYPE_CHECKING:  # pragma: no cover
    from optuna.trial import Trial
    from ray.tune import Result

    from rag_lab.eval.sweep.ray_worker import ShippedInputs
    from rag_lab.eval.sweep.runners import SuiteInput
    from rag_lab.lab.lab import Lab


class _OptunaSpace:
    """Define-by-run search space for OptunaSearch (a picklable callable: Tune checkpoints it)."""

    def __init__(self, spaces: Sequence[ParamSpace]) -> None:
        self.spaces = list(spaces)

    def __call__(self, trial: Trial) -> None:
        for s in self.spaces:
            s.suggest(trial)


async def run_sweep_on_ray(
    lab: Lab,
    suites: Iterable[SuiteInput],
    spaces: Sequence[ParamSpace],
    objective: str = "ndcg@10",
    *,
    n_trials: int = 0,
    seed: int = 0,
    ks: Sequence[int] = (1, 3, 5, 10),
    ragas_metrics: Sequence[str] = (),
    base_params: Mapping[str, object] | None = None,
    cache_dir: str | Path | None = None,
    ray_address: str | None = None,
    workers: int = 2,
    progress: bool = True,
    fast: bool = False,
    check: int | str = 0,
) -> SweepResult:
    """The grid (``n_trials == 0``) or an optuna search of ``n_trials`` trials on Ray Tune; rows
    in config order (grid) or trial order (optuna), each with the same columns as in-process plus
    ``worker_pid`` and ``worker_node`` (the Ray node that scored it).

    ``fast`` (grids only, when the objective and metrics read no answer): the driver captures the
    stage inputs of every retrieval config once (:mod:`rag_lab.eval.sweep.fast`), puts them in the
    object store with the workspace, and Ray tasks evaluate chunks of configs with the fast
    evaluator; the ``check`` best configs (or ``"all"``) are then scored again by the driver (same
    row asserted) and run through the full pipeline (same contexts and scores asserted), as the
    in-process fast sweep does."""
    if not ray_available():
        raise SweepError("Ray is not installed: pip install 'rag_lab[distributed]'")
    if workers < 1:
        raise SweepError(f"--ray-workers must be >= 1, got {workers}")
    if n_trials < 0:
        raise SweepError(f"--optuna-trials must be >= 0, got {n_trials}")
    direction = objective_direction(objective)
    configs = [] if n_trials else grid_configs(spaces)
    if any(s.name in INDEX_PARAMS for s in spaces):
        raise SweepError("BM25 index settings (bm25_k1, bm25_b, bm25_method) are swept in-process only for now")
    t0 = time.perf_counter()
    prepared = _prepare(lab, suites, progress)
    base = dict(base_params or {})
    cache_tar = None
    stats: dict[str, object] = {}
    from rag_lab.eval.sweep.fast import fast_path_reason

    if fast and not n_trials and not fast_path_reason(objective, ragas_metrics):
        return await _fast_grid_on_ray(
            lab, prepared, spaces, configs, objective, direction, ks, ragas_metrics, base, cache_dir,
            ray_address, workers, check, t0,
        )  # fmt: skip
    if cache_dir is not None:
        ev = _Evaluator(lab, prepared, objective, ks, ragas_metrics, base, cache_dir, None)
        try:
            await ev.warm_up(configs[0] if configs else {})
            stats = ev.stats()
        finally:
            ev.close(restore_index=False)
        cache_tar = pack_folder(cache_dir)
    payload = _payload(lab, prepared, spaces, configs, objective, ks, ragas_metrics, base, cache_tar)
    rows = _run_tune(payload, spaces, objective, direction, n_trials, seed, ray_address, workers, progress)
    for i, r in enumerate(rows):
        r["config_index"] = i
    return _result(spaces, objective, direction, rows, base, prepared, stats, t0)


def _payload(
    lab: Lab,
    prepared: Sequence[_Suite],
    spaces: Sequence[ParamSpace],
    configs: list[dict[str, ParamValue]],
    objective: str,
    ks: Sequence[int],
    ragas_metrics: Sequence[str],
    base: dict[str, object],
    cache_tar: bytes | None,
    fast_inputs: ShippedInputs | None = None,
) -> SweepPayload:
    return SweepPayload(
        lab_config=dict(lab.config),
        lab_class=type(lab),
        workspace_tar=pack_folder(lab.workspace.root, _SKIP),
        cache_tar=cache_tar,
        suites=[(s.name, s.dataset, s.kb) for s in prepared],
        objective=objective,
        ks=tuple(ks),
        ragas_metrics=list(ragas_metrics),
        base_params=base,
        configs=configs,
        spaces=list(spaces),
        token=f"{os.getpid()}-{time.time_ns()}",
        code_version=code_version(),
        fast_inputs=fast_inputs,
    )


def _result(
    spaces: Sequence[ParamSpace],
    objective: str,
    direction: str,
    rows: list[dict[str, Any]],
    base: dict[str, object],
    prepared: Sequence[_Suite],
    stats: dict[str, object],
    t0: float,
) -> SweepResult:
    return SweepResult(
        [s.name for s in spaces], objective, direction, rows, base, [s.name for s in prepared], stats,
        time.perf_counter() - t0,
    )  # fmt: skip


async def _fast_grid_on_ray(
    lab: Lab,
    prepared: list[_Suite],
    spaces: Sequence[ParamSpace],
    configs: list[dict[str, ParamValue]],
    objective: str,
    direction: str,
    ks: Sequence[int],
    ragas_metrics: Sequence[str],
    base: dict[str, object],
    cache_dir: str | Path | None,
    ray_address: str | None,
    workers: int,
    check: int | str,
    t0: float,
) -> SweepResult:
    import ray

    from rag_lab.eval.sweep.fast import FastSweep
    from rag_lab.eval.sweep.runners import _stats

    ev = _Evaluator(lab, prepared, objective, ks, ragas_metrics, base, cache_dir, None)
    fs = FastSweep(ev, check=check)
    try:
        for cfg in configs:  # one capture per distinct retrieval config, in the driver
            await fs._group(fs._split(cfg)[1])
        cache_tar = pack_folder(cache_dir) if cache_dir is not None else None
        payload = _payload(
            lab, prepared, spaces, configs, objective, ks, ragas_metrics, base, cache_tar, _ship_fast_inputs(fs)
        )
        conn = init_ray(ray_address, workers)
        try:
            ref = ray.put(payload)  # once; every task reads the same object
            task = ray.remote(num_cpus=1)(_evaluate_chunk_task)
            n_chunks = min(len(configs), 4 * workers)
            chunks = [list(range(len(configs)))[i::n_chunks] for i in range(n_chunks)]
            rows_by_index: dict[int, dict[str, Any]] = {}
            try:
                parts = ray.get([task.remote(ref, c) for c in chunks if c])
            except ray.exceptions.RayError as exc:
                raise SweepError(f"a Ray task failed: {remote_cause(exc)}") from None
            for part in parts:
                for row in part:
                    rows_by_index[int(row["config_index"])] = row
        finally:
            conn.close()
        rows = [rows_by_index[i] for i in range(len(configs))]
        chosen = fs.select(rows)
        for i in chosen:  # the driver scores the checked configs itself, then on the full pipeline
            mine = await fs.evaluate(configs[i])
            theirs = rows[i]
            diff = [
                k for k in mine if k not in _LOCAL_KEYS and mine.get(k) != theirs.get(k) and mine.get(k) == mine.get(k)
            ]
            if diff:
                raise SweepError(f"config {configs[i]}: a Ray worker's fast row differs from the driver's in {diff}")
        checked = await fs.verify(list(range(len(chosen))))
        for j, i in zip(checked, chosen):
            for key in ("latency_ms", "p95_latency_ms", "evaluated_by", "latency_of"):
                rows[i][key] = ev.rows[j][key]
        fs.checked = chosen
        stats = _stats(ev, fs)
    finally:
        ev.close(restore_index=False)
    return _result(spaces, objective, direction, rows, base, prepared, stats, t0)


#: times Tune restarts a failed trial (FailureConfig.max_failures)
TRIAL_RETRIES = 1

#: row keys that differ between two processes evaluating the same config
_LOCAL_KEYS = frozenset({"config_index", "worker_pid", "worker_node", "latency_ms", "p95_latency_ms", "fast_eval_ms"})


def _run_tune(
    payload: SweepPayload,
    spaces: Sequence[ParamSpace],
    objective: str,
    direction: str,
    n_trials: int,
    seed: int,
    ray_address: str | None,
    workers: int,
    progress: bool,
) -> list[dict[str, Any]]:
    from ray import tune

    conn = init_ray(ray_address, workers)
    storage = Path(tempfile.mkdtemp(prefix="rag_lab_tune_"))
    if not progress:
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # no experiment banner
    try:
        trainable = tune.with_resources(tune.with_parameters(_trainable, payload=payload), {"cpu": 1})
        mode = "max" if direction == "maximize" else "min"
        if n_trials:
            from ray.tune.search.optuna import OptunaSearch

            search = OptunaSearch(space=_OptunaSpace(spaces), metric=objective, mode=mode, seed=seed)
            tune_config = tune.TuneConfig(
                num_samples=n_trials, max_concurrent_trials=workers, search_alg=search, reuse_actors=True
            )
            param_space: dict[str, object] = {}
        else:
            tune_config = tune.TuneConfig(max_concurrent_trials=workers, reuse_actors=True)
            param_space = {"config_index": tune.grid_search(list(range(len(payload.configs))))}
        tuner = tune.Tuner(
            trainable,
            param_space=param_space,
            tune_config=tune_config,
            run_config=tune.RunConfig(
                name="rag_lab_sweep",
                storage_path=str(storage),
                verbose=1 if progress else 0,
                log_to_file=False,
                # a failed trial (its worker killed, out of memory, ...) is retried once; one that
                # fails again (e.g. a rag_lab version mismatch) is reported with its cause below
                failure_config=tune.FailureConfig(max_failures=TRIAL_RETRIES, fail_fast=False),
            ),
        )
        grid = tuner.fit()
        out: list[tuple[int, dict[str, Any]]] = []
        for res in (grid[i] for i in range(len(grid))):
            if res.error is not None:
                raise SweepError(f"a Ray Tune trial failed: {remote_cause(res.error)}")
            m = dict(res.metrics or {})
            row = {k: m[k] for k in _row_keys(m)}
            order = int(m["config_index"]) if not n_trials else _trial_number(res)
            if not n_trials:
                row = {**payload.configs[order], **row}
            out.append((order, row))
        out.sort(key=lambda x: x[0])
        return [r for _, r in out]
    finally:
        conn.close()
        shutil.rmtree(storage, ignore_errors=True)


_TUNE_KEYS = frozenset(
    {
        "timestamp",
        "checkpoint_dir_name",
        "done",
        "training_iteration",
        "trial_id",
        "date",
        "time_this_iter_s",
        "time_total_s",
        "pid",
        "hostname",
        "node_ip",
        "config",
        "time_since_restore",
        "iterations_since_restore",
        "experiment_tag",
        "should_checkpoint",
    }
)


def _row_keys(metrics: Mapping[str, object]) -> list[str]:
    return [k for k in metrics if k not in _TUNE_KEYS and not k.startswith("config/")]


def _trial_number(res: Result) -> int:
    """Trial creation order (Tune trial ids end in a zero-padded counter)."""
    tid = str((res.metrics or {}).get("trial_id", ""))
    tail = tid.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else math.inf  # type: ignore[return-value]


__all__ = [
    "DEFAULT_MIN_CONFIGS",
    "FAST_MIN_FACTOR",
    "ExecutorChoice",
    "SweepPayload",
    "choose_executor",
    "evaluate_chunk_in_worker",
    "evaluate_in_worker",
    "RayConnection",
    "RayUnavailable",
    "TRIAL_RETRIES",
    "check_code_version",
    "code_version",
    "init_ray",
    "pack_folder",
    "ray_available",
    "run_sweep_on_ray",
    "unpack_folder",
]
