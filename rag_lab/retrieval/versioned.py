"""Versioned index folders: a new version is written beside the old one and switched in with one
atomic rename of a pointer file, so a reader sees the old index or the new one, never a mix.

Layout of an index folder ``root``::

    root/CURRENT            one line: the name of the live version folder
    root/v<hex ns>-<pid>/   the files of one version (written complete, fsynced, then renamed in)

:func:`write_version` writes into ``root/<name>.tmp/``, fsyncs the files, renames the folder to
``root/<name>``, then replaces ``CURRENT`` (write ``CURRENT.tmp``, fsync, ``os.replace``) and
fsyncs ``root``. An interrupt at any point leaves ``CURRENT`` naming a complete version (or no
``CURRENT`` at all for a first save). The previous version is kept (a reader in another process
may have just read the old pointer); older ones and leftover ``.tmp`` folders are removed by the
next save, which always runs under the KB's write lock.

A folder without ``CURRENT`` is read as the pre-versioning layout (files directly in ``root``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

POINTER = "CURRENT"
KEEP_VERSIONS = 2


#: pointer path -> ((inode, mtime_ns, size), name): a pointer is replaced by a rename, so the same
#: stat means the same contents; readers check the pointer on every index access
_pointer_memo: dict[str, tuple[tuple[int, int, int], str | None]] = {}


def read_pointer(root: str | os.PathLike[str]) -> str | None:
    """The live version's name, or None (no versioned save yet). One ``stat`` when the pointer
    file is the one read last time."""
    path = os.path.join(root, POINTER)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        _pointer_memo.pop(path, None)
        return None
    key = (st.st_ino, st.st_mtime_ns, st.st_size)
    known = _pointer_memo.get(path)
    if known is not None and known[0] == key:
        return known[1]
    try:
        name = Path(path).read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None
    if len(_pointer_memo) > 4096:
        _pointer_memo.clear()
    _pointer_memo[path] = (key, name)
    return name


def current_dir(root: Path) -> tuple[Path, str | None]:
    """(folder holding the live files, version name or None for the legacy layout)."""
    root = Path(root)
    name = read_pointer(root)
    if name is None:
        return root, None
    # A pointer that names a missing folder is a version pruned after the pointer was read (or a
    # damaged index): return it anyway so that the loader reports it and reads the pointer again,
    # never the legacy layout, which would look like an empty index.
    return root / name, name


def _fsync_tree(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_version(root: Path, write: Callable[[Path], None], legacy_files: tuple[str, ...] = ()) -> str:
    """Write a new version with ``write(folder)`` and make it the live one; returns its name.
    ``legacy_files`` (pre-versioning files directly in ``root``) are removed once switched."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    name = f"v{time.time_ns():x}-{os.getpid()}"
    tmp = root / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        _fsync_tree(tmp)
        os.rename(tmp, root / name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    switch_pointer(root, name)
    for f in legacy_files:
        target = root / f
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    prune(root, keep={name})
    return name


def switch_pointer(root: Path, name: str) -> None:
    """The one atomic step: ``CURRENT`` now names ``name``."""
    tmp = root / f"{POINTER}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(name + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / POINTER)
    _fsync_dir(root)


def prune(root: Path, keep: set[str]) -> None:
    """Remove leftover ``.tmp`` folders and all versions but the newest ``KEEP_VERSIONS``."""
    versions = sorted(
        (p for p in root.iterdir() if p.is_dir() and p.name.startswith("v") and not p.name.endswith(".tmp")),
        key=lambda p: p.name,
    )
    keep = set(keep) | {p.name for p in versions[-KEEP_VERSIONS:]}
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith("v") and (p.name.endswith(".tmp") or p.name not in keep):
            shutil.rmtree(p, ignore_errors=True)
