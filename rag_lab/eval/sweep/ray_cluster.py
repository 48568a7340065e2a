"""Choosing and reaching Ray: whether a sweep is worth running on Ray (:func:`choose_executor`,
which says why), and connecting to or starting a cluster (:func:`init_ray`, a local one with its
own session folder and the workers' environment).

A local cluster listens on loopback only: its node address is ``127.0.0.1`` and every server it
starts (GCS, raylets, object manager, agents, workers) binds there, with no dashboard. Ray 2.x
turns ``_node_ip_address="127.0.0.1"`` into the machine's routable address unless it runs in its
single-machine mode (``ray._private.ray_constants.ENABLE_RAY_CLUSTER`` false, what Ray does on
macOS / Windows), so :func:`init_ray` starts the local cluster in that mode (restored afterwards);
``tests/eval/test_ray_sweep.py`` checks the listening sockets. A cluster reached by a loopback
address (``--ray 127.0.0.1:PORT``: nodes started with ``--node-ip-address=127.0.0.1``) is joined in
the same mode, so that the address is not rewritten either (``tests/eval/test_ray_two_nodes.py``).
A cluster that cannot start or be reached raises :class:`RayUnavailable` naming the cause.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypedDict

from rag_lab.eval.sweep.ray_worker import WORKER_TMP_ENV
from rag_lab.eval.sweep.specs import SweepError

#: where a local cluster listens
LOCAL_HOST = "127.0.0.1"


class RayUnavailable(SweepError):
    """Ray is installed but no cluster could be started or reached (the message says why)."""


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


@contextlib.contextmanager
def _single_machine_mode() -> Iterator[None]:
    """Ray's single-machine mode for the duration of a local start: ``127.0.0.1`` stays the node
    address (see the module docstring); a Ray without the switch starts as it would anyway."""
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - a Ray without the private module
        yield
        return
    saved = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    if saved is None:  # pragma: no cover
        yield
        return
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def _cause(exc: BaseException) -> str:
    first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def remote_cause(exc: BaseException) -> str:
    """``Type: message`` of what went wrong in a worker, on one line. Ray wraps the worker's
    exception (``RayTaskError.cause``; Tune's error holds it in its text, after the worker's
    traceback, as the last ``module.Type: message`` line)."""
    inner = getattr(exc, "cause", None)
    if isinstance(inner, BaseException) and inner is not exc:
        first = next((ln.strip() for ln in str(inner).splitlines() if ln.strip()), "")
        return f"{type(inner).__name__}: {first}"[:500]
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    causes = [ln for ln in lines if ln.split(":", 1)[0].rsplit(".", 1)[-1].endswith(("Error", "Exception"))]
    line = causes[-1] if causes else lines[-1] if lines else type(exc).__name__
    head, sep, rest = line.partition(":")
    return (head.rsplit(".", 1)[-1] + sep + rest if sep and " " not in head else line)[:500]


def is_loopback_address(address: str | None) -> bool:
    """Whether a Ray address (``host:port``, not ``auto`` nor ``ray://``) names this machine's
    loopback interface (``127.x.x.x``, ``::1``, ``localhost``)."""
    if not address or "://" in address or address == "auto":
        return False
    host = address.rpartition(":")[0] if address.count(":") == 1 or address.startswith("[") else address
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: tries at starting a local cluster. Ray waits a fixed 30 s for the new node to register with its
#: GCS and gives up with "timed out during startup"; on a loaded machine (its agents' Python start-up
#: takes longer than that) a second try, in a new session folder, usually gets through
LOCAL_START_ATTEMPTS = 2
#: the part of Ray's message that says the node was too slow to register (worth another try)
_STARTUP_TIMEOUT = "timed out during startup"


class _InitOptions(TypedDict):
    """The ``ray.init`` options of a local cluster and of a connection alike."""

    include_dashboard: bool
    log_to_driver: bool
    configure_logging: bool


def _start_local(ray: ModuleType, workers: int, common: _InitOptions) -> RayConnection:
    """A local cluster of ``workers`` CPUs in a session folder of its own; a start that timed out
    is tried again (:data:`LOCAL_START_ATTEMPTS`), any other failure raises at once."""
    causes: list[str] = []
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        # short: Ray puts unix sockets under it (107-byte limit)
        tmp = tempfile.mkdtemp(prefix="rlray_", dir="/tmp" if os.path.isdir("/tmp") else None)
        scratch = os.path.join(tmp, "rag_lab")
        os.makedirs(scratch)
        try:
            with _single_machine_mode():
                ray.init(
                    num_cpus=max(1, workers),
                    runtime_env={"env_vars": _local_env(scratch)},
                    _temp_dir=tmp,
                    _node_ip_address=LOCAL_HOST,
                    dashboard_host=LOCAL_HOST,
                    **common,
                )
        except Exception as exc:
            with contextlib.suppress(Exception):
                ray.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)
            causes.append(_cause(exc))
            if _STARTUP_TIMEOUT in str(exc) and attempt < LOCAL_START_ATTEMPTS:
                continue
            tries = f"{attempt} tries, " if attempt > 1 else ""
            raise RayUnavailable(
                f"could not start a local Ray cluster ({max(1, workers)} CPUs, {tries}session folder under {tmp}): "
                f"{'; then '.join(causes)}. Run the sweep without --ray, or start a cluster and pass --ray ADDRESS"
            ) from None
        return RayConnection(True, "local", tmp)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def init_ray(ray_address: str | None, workers: int) -> RayConnection:
    """Connect to / start Ray. A local cluster gets ``workers`` CPUs, a session folder of its own
    under the system temp dir (Ray's default ``/tmp/ray`` is left alone) and listens on
    ``127.0.0.1`` only (a start that timed out is tried once more). :class:`RayUnavailable` when it
    cannot start / be reached."""
    import ray

    if ray.is_initialized():
        return RayConnection(False, "already initialised")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    common: _InitOptions = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if ray_address in (None, "", "local"):
        return _start_local(ray, workers, common)
    try:
        # a loopback address kept as given (Ray would rewrite 127.0.0.1 into the routable address and
        # wait minutes for a GCS that listens on loopback only)
        with _single_machine_mode() if is_loopback_address(ray_address) else contextlib.nullcontext():
            ray.init(address=ray_address, **common)
    except Exception as exc:
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise RayUnavailable(
            f"could not connect to the Ray cluster at {ray_address!r}: {_cause(exc)}. "
            "Check the address (auto, ray://HEAD:10001) and that the cluster runs the same Ray version"
        ) from None
    return RayConnection(True, ray_address)
