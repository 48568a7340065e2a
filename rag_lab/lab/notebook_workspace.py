"""A workspace for a notebook's kernel that leaves no temporary folder behind.

:func:`notebook_workspace` hands out numbered folders (``slot-0``, ``slot-1``, …) under one
git-ignored root, ``<repo>/.rag_lab/notebooks`` (``RAG_LAB_NOTEBOOK_WORKSPACES`` names another).
A kernel holds its slot with an exclusive lock on ``slot-K.lock`` for as long as its process lives;
the operating system releases the lock however the process ends (a shutdown, a restart, a kill, as
nbclient does), so the next kernel takes the slot and empties it. The slots are reused run
after run: their number is the most kernels that ran at once, and a kernel that stops normally
empties its slot on the way out. Where file locks are not available (not POSIX), a temporary
folder removed at exit is used instead.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from pathlib import Path

from rag_lab.prompts.templates import REPO_ROOT

__all__ = ["DEFAULT_ROOT", "ENV_ROOT", "notebook_workspace"]

#: the environment variable naming the slots' root folder
ENV_ROOT = "RAG_LAB_NOTEBOOK_WORKSPACES"
#: where the slots live unless ``ENV_ROOT`` says otherwise (``.rag_lab/`` is git-ignored)
DEFAULT_ROOT = REPO_ROOT / ".rag_lab" / "notebooks"

#: the lock files this process holds open (one per slot it took); closed when the process ends
_HELD: list[object] = []


def _empty(folder: Path) -> None:
    """Remove what ``folder`` holds, keeping the folder."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def notebook_workspace(root: str | Path | None = None) -> Path:
    """An empty folder for this process's workspace: the first slot under ``root`` (default
    ``$RAG_LAB_NOTEBOOK_WORKSPACES``, else :data:`DEFAULT_ROOT`) that no running process holds,
    emptied and held until this process ends (then emptied again). Each call takes another slot,
    so a notebook's setup cell run twice gets a fresh folder while the first one's objects still
    point at theirs."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        folder = tempfile.TemporaryDirectory(prefix="rag_lab_nb_", ignore_cleanup_errors=True)
        _HELD.append(folder)  # kept alive until exit, then removed
        return Path(folder.name)
    base = Path(root if root is not None else os.environ.get(ENV_ROOT) or DEFAULT_ROOT)
    base.mkdir(parents=True, exist_ok=True)
    for k in itertools.count():
        lock = open(base / f"slot-{k}.lock", "a")  # noqa: SIM115 - held open for the process's life
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process (or an earlier call of this one) holds it
            lock.close()
            continue
        slot = base / f"slot-{k}"
        _empty(slot)
        slot.mkdir(exist_ok=True)
        _HELD.append(lock)
        atexit.register(_empty, slot)
        return slot
    raise AssertionError("unreachable")  # pragma: no cover
