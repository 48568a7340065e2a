"""Issue 27, point 6, the parts of a Ray sweep that need no cluster: what the workspace tar holds
(no Milvus Lite file, sessions, memories or stage cache), the rag_lab version handshake, the
trials' FailureConfig, and a cluster that cannot start (an error naming the cause)."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from rag_lab.eval.sweep.ray_worker import _SKIP, check_code_version, code_version, pack_folder
from rag_lab.eval.sweep.specs import SweepError


def test_the_workspace_tar_leaves_out_milvus_sessions_memories_and_the_cache(tmp_path):
    ws = tmp_path / "ws"
    (ws / "indexes" / "kb_1").mkdir(parents=True)
    (ws / "stage_cache").mkdir()
    for name, data in {
        "store.sqlite": b"s",
        "indexes/kb_1/vectors.npy": b"v",
        "milvus.db": b"m",
        ".milvus.db.lock": b"",
        "sessions.sqlite": b"x",
        "memory.sqlite": b"x",
        "store.sqlite-journal": b"j",
        "stage_cache/a.json": b"{}",
    }.items():
        (ws / name).write_bytes(data)
    with tarfile.open(fileobj=io.BytesIO(pack_folder(ws, _SKIP))) as tar:
        members = sorted(m.name for m in tar.getmembers())
    assert members == ["indexes", "indexes/kb_1", "indexes/kb_1/vectors.npy", "store.sqlite"]


def test_code_version_names_the_version_and_the_source_hash():
    import rag_lab

    v = code_version()
    version, digest = v.split("+")
    assert version == rag_lab.__version__ and len(digest) == 12 and int(digest, 16) >= 0
    check_code_version(v)
    check_code_version("")  # a payload from before the handshake: not checked
    with pytest.raises(SweepError, match=r"rag_lab version mismatch: the driver runs 9\.9\.9\+abc, this Ray worker"):
        check_code_version("9.9.9+abc")


def test_a_worker_refuses_a_payload_from_other_code():
    from rag_lab.eval.sweep.ray_worker import SweepPayload, evaluate_chunk_in_worker, evaluate_in_worker

    payload = SweepPayload({}, object, b"", None, [], "ndcg@10", (10,), [], {}, [{}], [], "t", code_version="0.0.0+x")
    with pytest.raises(SweepError, match="version mismatch"):
        evaluate_in_worker(payload, {"config_index": 0})
    with pytest.raises(SweepError, match="version mismatch"):
        evaluate_chunk_in_worker(payload, [0])


def test_tune_trials_get_a_failure_config(monkeypatch):
    pytest.importorskip("ray.tune")
    from ray import tune

    from rag_lab.eval.sweep import distributed
    from rag_lab.eval.sweep.ray_cluster import RayConnection

    seen = {}

    class FakeTuner:
        def __init__(self, trainable, **kw):
            seen.update(kw)

        def fit(self):
            return []

    monkeypatch.setattr(tune, "Tuner", FakeTuner)
    monkeypatch.setattr(distributed, "init_ray", lambda address, workers: RayConnection(False, "test"))
    payload = distributed.SweepPayload({}, object, b"", None, [], "ndcg@10", (10,), [], {}, [{}, {}], [], "t")
    assert distributed._run_tune(payload, [], "ndcg@10", "maximize", 0, 0, None, 2, False) == []
    fc = seen["run_config"].failure_config
    assert isinstance(fc, tune.FailureConfig) and fc.max_failures == distributed.TRIAL_RETRIES == 1


@pytest.mark.parametrize("address", [None, "ray://127.0.0.1:1"])
def test_a_cluster_that_cannot_start_raises_an_error_naming_the_cause(monkeypatch, tmp_path, address):
    ray = pytest.importorskip("ray")
    import tempfile

    from rag_lab.eval.sweep.ray_cluster import RayUnavailable, init_ray

    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(real_mkdtemp(dir=tmp_path, prefix=kw.get("prefix", "")))
        return made[-1]

    def fail(*a, **kw):
        raise RuntimeError("Failed to start the GCS server: port 6379 in use\n  (more traceback)")

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(ray, "init", fail)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(RayUnavailable) as info:
        init_ray(address, 2)
    text = str(info.value)
    assert "RuntimeError: Failed to start the GCS server: port 6379 in use" in text and "more traceback" not in text
    if address is None:
        assert text.startswith("could not start a local Ray cluster (2 CPUs") and "without --ray" in text
        assert made and not any(__import__("os").path.exists(p) for p in made)  # its session folder removed
    else:
        assert text.startswith("could not connect to the Ray cluster at 'ray://127.0.0.1:1'")
    assert isinstance(info.value, SweepError) and isinstance(info.value, ValueError)  # the CLI prints it, exit 2


def test_remote_cause_is_one_line_naming_the_workers_error():
    from rag_lab.eval.sweep.ray_cluster import remote_cause

    tune_text = (
        'Failure # 1 (occurred at 2026-01-01)\nray::ImplicitFunc.train() (pid=1)\n  File "x.py", line 3\n'
        "rag_lab.eval.sweep.specs.SweepError: rag_lab version mismatch: the driver runs 0.1.0+a"
    )
    assert remote_cause(RuntimeError(tune_text)) == "SweepError: rag_lab version mismatch: the driver runs 0.1.0+a"

    class Wrapped(Exception):
        cause = KeyError("k")

    assert remote_cause(Wrapped("long traceback")) == "KeyError: 'k'"


_TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of the raylet failed to "
    "startup or the GCS has become overloaded."
)


@pytest.mark.parametrize("timeouts", [1, 2])
def test_a_local_start_that_timed_out_is_tried_once_more_in_a_new_folder(monkeypatch, tmp_path, timeouts):
    """Ray gives a new node a fixed 30 s to register; under load the first start can miss it. A
    second start in a new session folder is tried; two timeouts raise, naming both."""
    ray = pytest.importorskip("ray")
    import tempfile

    from rag_lab.eval.sweep.ray_cluster import LOCAL_START_ATTEMPTS, RayUnavailable, init_ray

    assert LOCAL_START_ATTEMPTS == 2
    real_mkdtemp = tempfile.mkdtemp
    folders: list[str] = []
    shutdowns: list[int] = []

    def init(**kw):
        folders.append(kw["_temp_dir"])
        assert os.path.isdir(kw["_temp_dir"])
        if len(folders) <= timeouts:
            raise Exception(_TIMED_OUT)

    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: real_mkdtemp(dir=tmp_path, prefix=kw.get("prefix", "")))
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: shutdowns.append(1))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    if timeouts == 1:
        conn = init_ray(None, 2)
        assert conn.started and conn.temp_dir == folders[1] and os.path.isdir(folders[1])
        assert len(folders) == 2 and folders[0] != folders[1] and not os.path.exists(folders[0])
        assert len(shutdowns) == 1  # the half-started first cluster was shut down before the second try
    else:
        with pytest.raises(RayUnavailable) as info:
            init_ray(None, 2)
        text = str(info.value)
        assert text.startswith("could not start a local Ray cluster (2 CPUs, 2 tries, session folder under")
        assert text.count("Exception: The current node timed out during startup") == 2 and "; then " in text
        assert len(folders) == 2 and not any(os.path.exists(p) for p in folders)


def test_a_start_that_failed_otherwise_is_not_tried_again(monkeypatch, tmp_path):
    ray = pytest.importorskip("ray")
    import tempfile

    from rag_lab.eval.sweep.ray_cluster import RayUnavailable, init_ray

    calls: list[int] = []

    def init(**kw):
        calls.append(1)
        raise OSError("No space left on device")

    real_mkdtemp = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: real_mkdtemp(dir=tmp_path, prefix=kw.get("prefix", "")))
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(RayUnavailable, match=r"\(2 CPUs, session folder under .*OSError: No space left on device"):
        init_ray(None, 2)
    assert calls == [1]
