"""What runs in a Ray worker process: the :class:`SweepPayload` put once in the object store (the
workspace and stage cache as tar bytes, the lab config, the datasets, the evaluator settings,
optionally the fast path's captured stage inputs), the per-process Lab and evaluator built from it
(reused by every trial the process runs), and the Tune trainable / Ray task bodies."""

from __future__ import annotations

import functools
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from rag_lab.eval.sweep.runners import _Evaluator, _Suite
from rag_lab.eval.sweep.specs import ParamSpace, ParamValue, SweepError

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.sweep.fast import FastSweep
    from rag_lab.knowledge.models import Chunk
    from rag_lab.lab.lab import Lab
    from rag_lab.tuning import QuestionInputs
    from rag_lab.types.params import PipelineParams

    #: the fast path's captures, per retrieval group key, per suite: (captured questions without
    #: their store, the chunks their store memo had loaded, the capture params)
    ShippedInputs: TypeAlias = dict[
        tuple[tuple[str, object], ...], dict[str, tuple[list[QuestionInputs], dict[str, Chunk | None], PipelineParams]]
    ]

#: workspace files a worker does not need (sessions, memories, a Milvus Lite file, the cache)
_SKIP = ("sessions.sqlite", "memory.sqlite", "milvus.db", "stage_cache")
WORKER_TMP_ENV = "RAG_LAB_RAY_SCRATCH"


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<rag_lab version>+<hash>``: the package version and a SHA-256 (12 hex digits) over the
    paths and bytes of every ``.py`` file of the imported ``rag_lab``. The driver puts it in the
    payload and every worker compares it with its own (:func:`check_code_version`), so a node
    running other code fails with a clear error instead of scoring configs differently."""
    import rag_lab

    root = Path(rag_lab.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return f"{rag_lab.__version__}+{h.hexdigest()[:12]}"


def check_code_version(expected: str) -> None:
    """:class:`SweepError` when this process's :func:`code_version` is not ``expected``."""
    mine = code_version()
    if expected and expected != mine:
        raise SweepError(
            f"rag_lab version mismatch: the driver runs {expected}, this Ray worker (pid {os.getpid()}) runs "
            f"{mine}; install the same rag_lab on every node (or ship it with the job's runtime_env)"
        )


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

    lab_config: dict[str, object]
    #: the driver's Lab class (pickled by reference): each worker builds one from ``lab_config``
    lab_class: type[Lab]
    workspace_tar: bytes
    cache_tar: bytes | None
    suites: list[tuple[str, Dataset, str]]  # (name, dataset, kb name)
    objective: str
    ks: tuple[int, ...]
    ragas_metrics: list[str]
    base_params: dict[str, object]
    configs: list[dict[str, ParamValue]]  # the grid (empty for optuna)
    spaces: list[ParamSpace]
    token: str  # identifies this sweep's payload in a worker process
    #: the driver's :func:`code_version`, checked by every worker before it unpacks anything
    code_version: str = ""
    #: the fast path: per retrieval group key, per suite, (captured questions without their store,
    #: the chunks their store memo had loaded, the capture params); ``None`` = full pipeline
    fast_inputs: ShippedInputs | None = None


class _WorkerState:
    """One worker process's Lab and evaluator over its unpacked copy of the workspace."""

    def __init__(self, payload: SweepPayload) -> None:
        # a local cluster gives its workers a scratch folder inside its session folder (removed
        # with it); elsewhere the system temp dir, removed when the worker moves to another sweep
        scratch = os.environ.get(WORKER_TMP_ENV) or None
        self.tmp = Path(
            tempfile.mkdtemp(prefix="rag_lab_ray_", dir=scratch if scratch and os.path.isdir(scratch) else None)
        )
        ws = unpack_folder(payload.workspace_tar, self.tmp / "ws")
        cache_dir = unpack_folder(payload.cache_tar, self.tmp / "cache") if payload.cache_tar is not None else None
        cfg = {k: v for k, v in payload.lab_config.items() if k != "workspace"}
        self.lab = payload.lab_class(cfg, source="sweep worker", workspace=ws)
        suites = [_Suite(name, ds, kb) for name, ds, kb in payload.suites]
        self.evaluator = _Evaluator(
            self.lab, suites, payload.objective, payload.ks, payload.ragas_metrics, payload.base_params, cache_dir, None
        )

        self.fast: FastSweep | None = None
        if payload.fast_inputs is not None:
            self.fast = _fast_sweep_from(self.evaluator, payload.fast_inputs)

    def close(self) -> None:
        self.evaluator.close(restore_index=False)
        self.lab.workspace.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


_STATE: dict[str, _WorkerState] = {}


def _state_for(payload: SweepPayload) -> _WorkerState:
    check_code_version(payload.code_version)
    st = _STATE.get(payload.token)
    if st is None:
        for old in list(_STATE):  # a worker serves one sweep at a time
            _STATE.pop(old).close()
        st = _STATE[payload.token] = _WorkerState(payload)
    return st


def evaluate_in_worker(payload: SweepPayload, config: Mapping[str, ParamValue]) -> dict[str, Any]:
    """Score one config in this process (the Tune trainable's body)."""
    from rag_lab.asyncutil import run_sync

    st = _state_for(payload)
    if "config_index" in config:
        cfg = dict(payload.configs[int(config["config_index"])])
    else:  # sampled by OptunaSearch: recorded as the in-process search records its suggestions
        cfg = {s.name: s.normalise(config[s.name]) for s in payload.spaces}
    row = run_sync(lambda: st.evaluator.evaluate(cfg))
    st.evaluator.rows.clear()
    row.update(worker_place())
    return row


def worker_place() -> dict[str, object]:
    """Where a row was scored: ``worker_pid`` and ``worker_node`` (the Ray node id, hex)."""
    import ray

    return {"worker_pid": os.getpid(), "worker_node": ray.get_runtime_context().get_node_id()}


def _ship_fast_inputs(fs: FastSweep) -> ShippedInputs:
    """A FastSweep's captured groups without their SQLite handles (a worker reattaches its own)."""
    import dataclasses

    out: ShippedInputs = {}
    for key, per_suite in fs._groups.items():
        out[key] = {}
        for name, fe in per_suite.items():
            memo: dict[str, Chunk | None] = {}
            for q in fe.inputs:
                if q.store is not None:
                    memo.update(q.store.chunks)
            out[key][name] = ([dataclasses.replace(q, store=None) for q in fe.inputs], memo, fe.base)
    return out


def _fast_sweep_from(ev: _Evaluator, shipped: ShippedInputs) -> FastSweep:
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
        row.update(worker_place())
        rows.append(row)
    st.evaluator.rows.clear()
    st.fast.fast_records.clear()
    return rows


def _trainable(config: dict[str, ParamValue], payload: SweepPayload) -> None:
    from ray import tune

    tune.report(evaluate_in_worker(payload, config))


def _evaluate_chunk_task(payload: SweepPayload, indices: list[int]) -> list[dict[str, Any]]:
    return evaluate_chunk_in_worker(payload, indices)
