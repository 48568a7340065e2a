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
  one :class:`~rag_lab.lab.lab.Lab` from the same config, reused by every trial it runs. Nothing
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
handles, Ray tasks per chunk of configs, the ``check`` sample re-scored by the driver and re-run
on the full pipeline.

Ray costs time before any evaluation: starting a local cluster (seconds), and per Tune trial an
actor plus bookkeeping (~1-3 s measured by ``benchmarks/scale_out.py``). :func:`choose_executor`
keeps small sweeps in-process and says why.
"""

from __future__ import annotations

import io
import math
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.eval.sweep.outputs import SweepResult
from rag_lab.eval.sweep.runners import _Evaluator, _prepare, _Suite
from rag_lab.eval.sweep.specs import INDEX_PARAMS, ParamSpace, SweepError, grid_configs, objective_direction

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

#: below this many configs a sweep stays in-process unless forced (see choose_executor)
DEFAULT_MIN_CONFIGS = 8
#: with the fast evaluator, Ray needs this many times more configs (see choose_executor)
FAST_MIN_FACTOR = 250
#: workspace files a worker does not need (sessions, memories, a Milvus Lite file, the cache)
_SKIP = ("sessions.sqlite", "memory.sqlite", "stage_cache")
WORKER_TMP_ENV = "RAG_LAB_RAY_SCRATCH"


@dataclass(frozen=True, slots=True)
class ExecutorChoice:
    kind: str  # "ray" | "in-process"
    reason: str

    def __str__(self) -> str:
        return f"executor: {self.kind} ({self.reason})"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
        import ray.tune  # noqa: F401
    except ImportError:
        return False
    return True


def choose_executor(
    n_configs: int,
    n_queries: int,
    ray_address: str | None,
    *,
    requested: bool,
    workers: int,
    min_configs: int = DEFAULT_MIN_CONFIGS,
    fast: bool = False,
) -> ExecutorChoice:
    """Ray only when asked for, installed, and worth it. On the full pipeline: at least
    ``min_configs`` configs (each Tune trial costs an actor start and bookkeeping, ~2 s measured,
    which a small sweep never wins back). With the fast evaluator (``fast``: a grid whose metrics
    read no answer) a config costs milliseconds in-process, so Ray needs
    ``FAST_MIN_FACTOR * min_configs`` configs (2,000 by default)."""
    where = ray_address or "a local cluster"
    if not requested:
        return ExecutorChoice("in-process", "no --ray given")
    if not ray_available():
        return ExecutorChoice("in-process", "Ray is not installed: pip install 'rag_lab[distributed]'")
    if fast:
        need = FAST_MIN_FACTOR * min_configs
        if n_configs < 2 or n_configs < need:
            return ExecutorChoice(
                "in-process",
                f"{n_configs} configs < {need} ({FAST_MIN_FACTOR} x --ray-min-configs): the fast evaluator scores "
                "a config in milliseconds here, less than Ray costs to start; --no-fast or more configs for Ray",
            )
        return ExecutorChoice(
            "ray",
            f"{n_configs} configs x {n_queries} questions on {where} with {workers} workers: stage inputs captured "
            "once here, Ray tasks score chunks of configs with the fast evaluator",
        )
    if n_configs < 2 or n_configs < min_configs:
        return ExecutorChoice(
            "in-process",
            f"{n_configs} configs < --ray-min-configs {min_configs}: a Ray Tune trial costs ~2 s to start, "
            "more than a small sweep saves",
        )
    return ExecutorChoice(
        "ray",
        f"{n_configs} configs x {n_queries} questions on {where} with {workers} workers, one Tune trial per config",
    )


# --------------------------------------------------------------------------- payload


def pack_folder(root: str | Path, skip: Sequence[str] = ()) -> bytes:
    """A folder as tar bytes (top-level names in ``skip`` left out)."""
    buf = io.BytesIO()
    root = Path(root)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if root.exists():
            for p in sorted(root.iterdir()):
                if p.name in skip or p.name.endswith((".lock", "-journal")):
                    continue
                tar.add(p, arcname=p.name)
    return buf.getvalue()


def unpack_folder(data: bytes, dest: str | Path) -> Path:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter="data")
    return dest


@dataclass
class SweepPayload:
    """Everything a worker needs, put once in the object store."""

    lab_config: dict[str, Any]
    workspace_tar: bytes
    cache_tar: bytes | None
    suites: list[tuple[str, Any, str]]  # (name, dataset, kb name)
    objective: str
    ks: tuple[int, ...]
    ragas_metrics: list[str]
    base_params: dict[str, Any]
    configs: list[dict[str, Any]]  # the grid (empty for optuna)
    spaces: list[ParamSpace]
    token: str  # identifies this sweep's payload in a worker process
    #: the fast path: per retrieval group key, per suite, (captured questions without their store,
    #: the chunks their store memo had loaded, the capture params); ``None`` = full pipeline
    fast_inputs: dict[Any, dict[str, tuple[list[Any], dict[str, Any], Any]]] | None = None


class _WorkerState:
    """One worker process's Lab and evaluator over its unpacked copy of the workspace."""

    def __init__(self, payload: SweepPayload) -> None:
        from rag_lab.lab.lab import Lab

        # a local cluster gives its workers a scratch folder inside its session folder (removed
        # with it); elsewhere the system temp dir, removed when the worker moves to another sweep
        scratch = os.environ.get(WORKER_TMP_ENV) or None
        self.tmp = Path(
            tempfile.mkdtemp(prefix="rag_lab_ray_", dir=scratch if scratch and os.path.isdir(scratch) else None)
        )
        ws = unpack_folder(payload.workspace_tar, self.tmp / "ws")
        cache_dir = unpack_folder(payload.cache_tar, self.tmp / "cache") if payload.cache_tar is not None else None
        cfg = {k: v for k, v in payload.lab_config.items() if k != "workspace"}
        self.lab = Lab(cfg, source="sweep worker", workspace=ws)
        suites = [_Suite(name, ds, kb) for name, ds, kb in payload.suites]
        self.evaluator = _Evaluator(
            self.lab, suites, payload.objective, payload.ks, payload.ragas_metrics, payload.base_params, cache_dir, None
        )

        self.fast = None
        if payload.fast_inputs is not None:
            self.fast = _fast_sweep_from(self.evaluator, payload.fast_inputs)

    def close(self) -> None:
        self.evaluator.close(restore_index=False)
        self.lab.workspace.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


_STATE: dict[str, _WorkerState] = {}


def _state_for(payload: SweepPayload) -> _WorkerState:
    st = _STATE.get(payload.token)
    if st is None:
        for old in list(_STATE):  # a worker serves one sweep at a time
            _STATE.pop(old).close()
        st = _STATE[payload.token] = _WorkerState(payload)
    return st


def evaluate_in_worker(payload: SweepPayload, config: Mapping[str, Any]) -> dict[str, Any]:
    """Score one config in this process (the Tune trainable's body)."""
    from rag_lab.asyncutil import run_sync

    st = _state_for(payload)
    if "config_index" in config:
        cfg = dict(payload.configs[int(config["config_index"])])
    else:  # sampled by OptunaSearch: recorded as the in-process search records its suggestions
        cfg = {s.name: s.normalise(config[s.name]) for s in payload.spaces}
    row = run_sync(lambda: st.evaluator.evaluate(cfg))
    st.evaluator.rows.clear()
    row["worker_pid"] = os.getpid()
    return row


def _ship_fast_inputs(fs: Any) -> dict[Any, dict[str, tuple[list[Any], dict[str, Any], Any]]]:
    """A FastSweep's captured groups without their SQLite handles (a worker reattaches its own)."""
    import dataclasses

    out: dict[Any, dict[str, tuple[list[Any], dict[str, Any], Any]]] = {}
    for key, per_suite in fs._groups.items():
        out[key] = {}
        for name, fe in per_suite.items():
            memo: dict[str, Any] = {}
            for q in fe.inputs:
                if q.store is not None:
                    memo.update(q.store.chunks)
            out[key][name] = ([dataclasses.replace(q, store=None) for q in fe.inputs], memo, fe.base)
    return out


def _fast_sweep_from(ev: _Evaluator, shipped: Mapping[Any, Mapping[str, tuple[list[Any], dict[str, Any], Any]]]) -> Any:
    """A FastSweep over ``ev`` (a worker's) holding the driver's captures, each question reading
    chunks through a memo of the worker's own copy of the store."""
    import dataclasses

    from rag_lab.eval.sweep.fast import FastSweep
    from rag_lab.tuning import FastEvaluator, StoreMemo

    fs = FastSweep(ev, check=0)
    for key, per_suite in shipped.items():
        group = {}
        for name, (inputs, chunks, base) in per_suite.items():
            memo = StoreMemo(ev.lab.workspace.store)
            memo.chunks.update(chunks)
            group[name] = FastEvaluator([dataclasses.replace(q, store=memo) for q in inputs], base)
        fs._groups[key] = group
    return fs


def evaluate_chunk_in_worker(payload: SweepPayload, indices: Sequence[int]) -> list[dict[str, Any]]:
    """Rows of the grid configs ``indices`` from the fast evaluator, in this process."""
    from rag_lab.asyncutil import run_sync

    st = _state_for(payload)
    if st.fast is None:
        raise SweepError("this sweep was not prepared for the fast evaluator")
    rows = []
    for i in indices:
        row: dict[str, Any] = run_sync(lambda i=i: st.fast.evaluate(dict(payload.configs[i])))  # type: ignore[misc]
        row["config_index"] = i
        row["worker_pid"] = os.getpid()
        rows.append(row)
    st.evaluator.rows.clear()
    st.fast.fast_records.clear()
    return rows


def _trainable(config: dict[str, Any], payload: SweepPayload) -> None:
    from ray import tune

    tune.report(evaluate_in_worker(payload, config))


# --------------------------------------------------------------------------- driver


def _local_env(scratch: str) -> dict[str, str]:
    """Environment of local-cluster workers: rag_lab importable the way the driver imports it,
    and their scratch folder."""
    import rag_lab

    src = str(Path(rag_lab.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return {
        "PYTHONPATH": path,
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),
        WORKER_TMP_ENV: scratch,
    }


@dataclass
class RayConnection:
    """What :func:`init_ray` did: ``started`` a cluster / connection this run must close, and
    the session folder of a local cluster (removed by :meth:`close`)."""

    started: bool
    address: str
    temp_dir: str | None = None

    def close(self) -> None:
        import ray

        if self.started:
            ray.shutdown()
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def init_ray(ray_address: str | None, workers: int) -> RayConnection:
    """Connect to / start Ray. A local cluster gets ``workers`` CPUs and a session folder of its
    own under the system temp dir (Ray's default ``/tmp/ray`` is left alone)."""
    import ray

    if ray.is_initialized():
        return RayConnection(False, "already initialised")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    common: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if ray_address in (None, "", "local"):
        # short: Ray puts unix sockets under it (107-byte limit)
        tmp = tempfile.mkdtemp(prefix="rlray_", dir="/tmp" if os.path.isdir("/tmp") else None)
        scratch = os.path.join(tmp, "rag_lab")
        os.makedirs(scratch)
        ray.init(num_cpus=max(1, workers), runtime_env={"env_vars": _local_env(scratch)}, _temp_dir=tmp, **common)
        return RayConnection(True, "local", tmp)
    ray.init(address=ray_address, **common)
    return RayConnection(True, ray_address)


class _OptunaSpace:
    """Define-by-run search space for OptunaSearch (a picklable callable: Tune checkpoints it)."""

    def __init__(self, spaces: Sequence[ParamSpace]) -> None:
        self.spaces = list(spaces)

    def __call__(self, trial: Any) -> None:
        for s in self.spaces:
            s.suggest(trial)


async def run_sweep_on_ray(
    lab: Lab,
    suites: Iterable[Any],
    spaces: Sequence[ParamSpace],
    objective: str = "ndcg@10",
    *,
    n_trials: int = 0,
    seed: int = 0,
    ks: Sequence[int] = (1, 3, 5, 10),
    ragas_metrics: Sequence[str] = (),
    base_params: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
    ray_address: str | None = None,
    workers: int = 2,
    progress: bool = True,
    fast: bool = False,
    check: int = 5,
    check_seed: int = 0,
) -> SweepResult:
    """The grid (``n_trials == 0``) or an optuna search of ``n_trials`` trials on Ray Tune; rows
    in config order (grid) or trial order (optuna), each with the same columns as in-process plus
    ``worker_pid``.

    ``fast`` (grids only, when the objective and metrics read no answer): the driver captures the
    stage inputs of every retrieval config once (:mod:`rag_lab.eval.sweep.fast`), puts them in the
    object store with the workspace, and Ray tasks evaluate chunks of configs with the fast
    evaluator; ``check`` sampled configs are then scored again by the driver (same row asserted)
    and run through the full pipeline (same contexts asserted), as the in-process fast sweep does."""
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
    stats: dict[str, Any] = {}
    from rag_lab.eval.sweep.fast import fast_path_reason

    if fast and not n_trials and not fast_path_reason(objective, ragas_metrics):
        return await _fast_grid_on_ray(
            lab, prepared, spaces, configs, objective, direction, ks, ragas_metrics, base, cache_dir,
            ray_address, workers, check, check_seed, t0,
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
    configs: list[dict[str, Any]],
    objective: str,
    ks: Sequence[int],
    ragas_metrics: Sequence[str],
    base: dict[str, Any],
    cache_tar: bytes | None,
    fast_inputs: Any = None,
) -> SweepPayload:
    return SweepPayload(
        lab_config=dict(lab.config),
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
        fast_inputs=fast_inputs,
    )


def _result(
    spaces: Sequence[ParamSpace],
    objective: str,
    direction: str,
    rows: list[dict[str, Any]],
    base: dict[str, Any],
    prepared: Sequence[_Suite],
    stats: dict[str, Any],
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
    configs: list[dict[str, Any]],
    objective: str,
    direction: str,
    ks: Sequence[int],
    ragas_metrics: Sequence[str],
    base: dict[str, Any],
    cache_dir: str | Path | None,
    ray_address: str | None,
    workers: int,
    check: int,
    check_seed: int,
    t0: float,
) -> SweepResult:
    import ray

    from rag_lab.eval.sweep.fast import FastSweep
    from rag_lab.eval.sweep.runners import _stats

    ev = _Evaluator(lab, prepared, objective, ks, ragas_metrics, base, cache_dir, None)
    fs = FastSweep(ev, check=check, seed=check_seed)
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
            for part in ray.get([task.remote(ref, c) for c in chunks if c]):
                for row in part:
                    rows_by_index[int(row["config_index"])] = row
        finally:
            conn.close()
        rows = [rows_by_index[i] for i in range(len(configs))]
        pool = list(range(len(rows)))
        chosen = sorted(fs.rng.sample(pool, min(check, len(pool))))
        for i in chosen:  # the driver scores the sample itself, then on the full pipeline
            mine = await fs.evaluate(configs[i])
            theirs = rows[i]
            diff = [
                k for k in mine if k not in _LOCAL_KEYS and mine.get(k) != theirs.get(k) and mine.get(k) == mine.get(k)
            ]
            if diff:
                raise SweepError(f"config {configs[i]}: a Ray worker's fast row differs from the driver's in {diff}")
        checked = await fs.verify(list(range(len(chosen))))
        for j, i in zip(checked, chosen):
            rows[i]["latency_ms"] = ev.rows[j]["latency_ms"]
            rows[i]["evaluated_by"] = ev.rows[j]["evaluated_by"]
        fs.checked = chosen
        stats = _stats(ev, fs)
    finally:
        ev.close(restore_index=False)
    return _result(spaces, objective, direction, rows, base, prepared, stats, t0)


#: row keys that differ between two processes evaluating the same config
_LOCAL_KEYS = frozenset({"config_index", "worker_pid", "latency_ms", "p95_latency_ms"})


def _evaluate_chunk_task(payload: SweepPayload, indices: list[int]) -> list[dict[str, Any]]:
    return evaluate_chunk_in_worker(payload, indices)


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
            param_space: dict[str, Any] = {}
        else:
            tune_config = tune.TuneConfig(max_concurrent_trials=workers, reuse_actors=True)
            param_space = {"config_index": tune.grid_search(list(range(len(payload.configs))))}
        tuner = tune.Tuner(
            trainable,
            param_space=param_space,
            tune_config=tune_config,
            run_config=tune.RunConfig(
                name="rag_lab_sweep", storage_path=str(storage), verbose=1 if progress else 0, log_to_file=False
            ),
        )
        grid = tuner.fit()
        out: list[tuple[int, dict[str, Any]]] = []
        for res in (grid[i] for i in range(len(grid))):
            if res.error is not None:
                raise SweepError(f"a Ray Tune trial failed: {res.error}")
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


def _row_keys(metrics: Mapping[str, Any]) -> list[str]:
    return [k for k in metrics if k not in _TUNE_KEYS and not k.startswith("config/")]


def _trial_number(res: Any) -> int:
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
    "init_ray",
    "pack_folder",
    "ray_available",
    "run_sweep_on_ray",
    "unpack_folder",
]
