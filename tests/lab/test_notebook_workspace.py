"""The notebooks' workspaces: numbered slots under one root, held by a lock for the life of the
kernel that took them and emptied when the next kernel takes them, so no run leaves a temporary
folder behind, even a kernel that was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from rag_lab.lab.notebook_workspace import ENV_ROOT, notebook_workspace

ROOT = Path(__file__).resolve().parents[2]


def _kernel(root: Path, script: str) -> subprocess.Popen[str]:
    """A process standing in for a kernel: takes a slot under ``root``, prints it, runs ``script``."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from rag_lab.lab.notebook_workspace import notebook_workspace
        ws = notebook_workspace({str(root)!r})
        (ws / "index.sqlite").write_text("data")
        print(ws, flush=True)
        """
    ) + textwrap.dedent(script)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)


def test_a_held_slot_is_not_shared_and_a_second_call_takes_another(tmp_path: Path) -> None:
    held = _kernel(tmp_path, "time.sleep(60)")
    try:
        assert held.stdout is not None
        theirs = Path(held.stdout.readline().strip())
        mine = notebook_workspace(tmp_path)
        again = notebook_workspace(tmp_path)  # the setup cell run twice in one kernel
        assert theirs == tmp_path / "slot-0" and (theirs / "index.sqlite").read_text() == "data"
        assert (mine, again) == (tmp_path / "slot-1", tmp_path / "slot-2")
        assert not any(mine.iterdir()) and not any(again.iterdir())
    finally:
        held.kill()
        held.wait()


def test_a_killed_kernels_slot_is_taken_again_and_emptied(tmp_path: Path) -> None:
    killed = _kernel(tmp_path, "time.sleep(60)")
    assert killed.stdout is not None
    slot = Path(killed.stdout.readline().strip())
    killed.send_signal(signal.SIGKILL)  # as nbclient stops its kernels: no exit handler runs
    killed.wait()
    assert (slot / "index.sqlite").exists()  # left as it was by the killed process …
    assert notebook_workspace(tmp_path) == slot and not any(slot.iterdir())  # … emptied by the next taker
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slot-0", "slot-0.lock"]  # no other folder


def test_a_kernel_that_stops_normally_empties_its_slot(tmp_path: Path) -> None:
    done = _kernel(tmp_path, "")
    out, _ = done.communicate(timeout=60)
    slot = Path(out.strip())
    assert done.returncode == 0 and slot.is_dir() and not any(slot.iterdir())


def test_the_root_comes_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(ENV_ROOT, str(tmp_path / "elsewhere"))
    assert notebook_workspace().parent == tmp_path / "elsewhere"
