"""Choosing and reaching Ray: whether a sweep is worth running on Ray (:func:`choose_executor`,
which says why), and connecting to or starting a cluster (:func:`init_ray`, a local one with its
own session folder and the workers' environment)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.eval.sweep.ray_worker import WORKER_TMP_ENV

#: below this many configs a sweep stays in-process unless forced (see choose_executor)
DEFAULT_MIN_CONFIGS = 8
#: with the fast evaluator, Ray needs this many times more configs (see choose_executor)
FAST_MIN_FACTOR = 250


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
