"""A real two-node Ray cluster on loopback: a head and a worker node, each its own ``ray start``
process (own session folder, ports chosen free, 1 CPU each), and the sweep the CLI runs for
``rag-lab sweep --ray 127.0.0.1:PORT`` (``run_sweep_on_ray`` with that address). The rows equal
the in-process sweep's, the trials ran on both nodes, and every socket the Ray processes listen
on is bound to loopback.

Marker ``cluster`` (``make test-cluster``; left out of ``make test``): starting two nodes takes
~30 s each on a quiet 2-core machine and much longer under load, so the waits are generous and
nothing here is timed.

How the nodes keep to 127.0.0.1 (Ray 2.60): ``ray start`` and ``ray.init`` rewrite ``127.0.0.1``
into the machine's routable address unless they run in Ray's single-machine mode, in which a
worker node refuses to start. The nodes are therefore started through
``tests/eval/ray_loopback_start.py`` (``ray start`` keeping loopback addresses as given, nothing
else changed), and the driver joins by a loopback address in single-machine mode
(``init_ray``, as ``rag-lab sweep --ray 127.0.0.1:PORT`` does). Both nodes' registered addresses
and every listening socket are checked."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

if os.environ.get("RAG_LAB_REQUIRE_EXTRAS") or os.environ.get("CI"):
    import psutil
    import ray.tune  # noqa: F401  (make test-cluster installs the extra: never skip there)
else:
    pytest.importorskip("ray.tune", reason="Ray sweeps need the 'distributed' extra")
    psutil = pytest.importorskip("psutil")

from rag_lab.eval.sweep import parse_param, run_grid  # noqa: E402
from rag_lab.eval.sweep.distributed import init_ray, run_sweep_on_ray  # noqa: E402
from tests.eval.test_ray_sweep import SPACES, _same  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = Path(__file__).with_name("ray_loopback_start.py")
#: seconds to wait for the two nodes (a quiet machine needs ~30 s per node)
STARTUP_S = 420.0
_LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(n: int, used: set[int]) -> list[int]:
    """``n`` consecutive free ports (a worker-port range must be consecutive), none in ``used``."""
    rnd = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(500):
        start = rnd.randrange(20_000, 45_000)
        ports = list(range(start, start + n))
        if not used & set(ports) and all(_free(p) for p in ports):
            used.update(ports)
            return ports
    raise RuntimeError(f"no {n} consecutive free ports on 127.0.0.1")


def _node_args(used: set[int]) -> list[str]:
    """Every port a node opens, chosen free: node manager, object manager, agents, metrics,
    and a range of 16 for its worker processes."""
    names = [
        "--node-manager-port",
        "--object-manager-port",
        "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port",
        "--runtime-env-agent-port",
        "--metrics-export-port",
    ]
    ports = _free_ports(len(names), used)
    workers = _free_ports(16, used)
    args = [f"{n}={p}" for n, p in zip(names, ports)]
    return args + [f"--min-worker-port={workers[0]}", f"--max-worker-port={workers[-1]}"]


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:  # the child keeps its own handle
        return subprocess.Popen(
            [sys.executable, str(LAUNCHER), "start", "--block", "--num-cpus=1", "--disable-usage-stats", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped by that id, nothing else
        )


def _stop(proc: subprocess.Popen) -> None:
    family = []
    with contextlib.suppress(psutil.NoSuchProcess):
        family = psutil.Process(proc.pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # `ray start --block` stops its node's processes
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    _, alive = psutil.wait_procs(family, timeout=30)
    for p in alive:  # a child that left the group: by its own pid
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()


def _listeners(procs: list[subprocess.Popen]) -> dict[str, set[str]]:
    """Listening TCP / bound UDP addresses of the nodes' processes, by ``name[pid]``."""
    out: dict[str, set[str]] = {}
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
                try:
                    conns, name = p.net_connections(kind="inet"), f"{p.name()}[{p.pid}]"
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                for c in conns:
                    if c.status == psutil.CONN_LISTEN or (c.type == socket.SOCK_DGRAM and not c.raddr):
                        out.setdefault(name, set()).add(f"{c.laddr.ip}:{c.laddr.port}")
    return out


def _started(log: Path) -> bool:
    return log.exists() and "Ray runtime started" in log.read_text(errors="replace")


def _log_tail(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-2000:] for p in sorted(folder.glob("*.log")))


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """(address, {node id: is head}, [head process, worker process]) of a running two-node cluster."""
    import ray

    root = Path(tempfile.mkdtemp(prefix="rl2n_", dir="/tmp"))  # short: Ray's unix sockets live under it
    logs = tmp_path_factory.mktemp("ray_logs")
    home = tmp_path_factory.mktemp("home")
    (root / "scratch").mkdir()
    saved = {k: os.environ.get(k) for k in ("HOME", "RAY_AUTH_MODE")}
    os.environ.update(HOME=str(home), RAY_AUTH_MODE="disabled")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAG_LAB_RAY_SCRATCH": str(root / "scratch"),
    }
    used: set[int] = set()
    gcs, client = _free_ports(1, used)[0], _free_ports(1, used)[0]
    address = f"127.0.0.1:{gcs}"
    procs: list[subprocess.Popen] = []
    try:
        head_args = ["--head", "--node-ip-address=127.0.0.1", f"--port={gcs}", f"--ray-client-server-port={client}"]
        head_args += ["--include-dashboard=false", f"--temp-dir={root / 'head'}", *_node_args(used)]
        procs.append(_start(head_args, env, logs / "head.log"))
        worker_args = [f"--address={address}", "--node-ip-address=127.0.0.1", f"--temp-dir={root / 'worker'}"]
        worker_args += _node_args(used)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline and not all(_started(logs / f"{n}.log") for n in ("head", "worker")):
            assert all(p.poll() is None for p in procs), "a ray start exited:\n" + _log_tail(logs)
            if len(procs) == 1 and _started(logs / "head.log"):
                procs.append(_start(worker_args, env, logs / "worker.log"))
            time.sleep(2)
        assert len(procs) == 2 and _started(logs / "worker.log"), f"not up after {STARTUP_S:.0f} s\n" + _log_tail(logs)
        conn = init_ray(address, 2)  # what run_sweep_on_ray does with this address
        nodes: dict[str, bool] = {}
        while time.monotonic() < deadline and len(nodes) < 2:  # the worker node registers with the GCS
            alive = [n for n in ray.nodes() if n["Alive"]]
            nodes = {n["NodeID"]: "node:__internal_head__" in n["Resources"] for n in alive}
            time.sleep(1)
        addrs = {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}
        assert sorted(nodes.values()) == [False, True] and addrs == {"127.0.0.1"}, (nodes, addrs)
        conn.close()
        # the sweep connects by address itself, as `rag-lab sweep --ray ADDRESS` does
        yield address, nodes, procs
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(root, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def test_a_sweep_on_two_loopback_nodes_equals_the_local_sweep(
    two_nodes, eval_lab, small_spec, small_ds, tmp_path
):
    address, nodes, procs = two_nodes
    spaces = [parse_param(s) for s in SPACES]
    suites = [(small_ds, small_spec.kb_name)]
    local = await run_grid(eval_lab, suites, spaces, cache_dir=tmp_path / "c1", progress=False, fast=False)
    remote = await run_sweep_on_ray(
        eval_lab, suites, spaces, cache_dir=tmp_path / "c2", ray_address=address, workers=2, progress=False
    )
    assert [r["config_index"] for r in remote.rows] == [0, 1, 2, 3]
    for a, b in zip(local.rows, remote.rows):
        _same(a, b)
    assert local.best_config() == remote.best_config()
    assert len({r["ndcg@10"] for r in local.rows}) > 1  # the configs differ: equality is not vacuous
    # two trials at a time, one CPU per node: both nodes scored configs
    assert {r["worker_node"] for r in remote.rows} == set(nodes)

    found = _listeners(procs)
    names = [n.split("[", 1)[0] for n in found]
    assert names.count("raylet") == 2 and names.count("gcs_server") == 1, found
    wide = {n: a for n, a in found.items() if any(x.rsplit(":", 1)[0] not in _LOOPBACK for x in a)}
    assert not wide, f"listening beyond loopback: {wide}"
