"""pytest's start-up with every installed plugin autoloaded (langsmith, anyio, … come with the
eval extras) vs only the plugins the suite uses, as the Makefile runs it
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p asyncio -p hypothesispytest``), taking turns.

Usage: .venv/bin/python benchmarks/pytest_startup.py [ROUNDS] [TEST_FILE]
       .venv/bin/python benchmarks/pytest_startup.py --bytecode [ROUNDS]

Each round collects TEST_FILE (default tests/eval/test_eval_gate.py) with ``--collect-only`` in a
new process both ways. Prints ``pytest start-up: autoload X s, explicit plugins Y s (best of N)``.

``--bytecode``: collecting the whole suite (explicit plugins) with ``PYTHONDONTWRITEBYTECODE=1``
and no ``.pyc`` of rag_lab and the tests (removed before each such round: they are caches), vs
with the ``.pyc`` files the Makefile now lets Python write; CPU seconds of the child, as
``pytest collection: no bytecode X s CPU, bytecode Y s CPU (best of N)``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _collect(test_file: str, explicit: bool) -> float:
    env = dict(os.environ)
    cmd = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", test_file]
    if explicit:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        cmd[3:3] = ["-p", "asyncio", "-p", "hypothesispytest"]
    else:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def _collect_cpu(bytecode: bool) -> float:
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for folder in ("rag_lab", "tests"):
            for pyc in (ROOT / folder).rglob("*.pyc"):
                pyc.unlink()
    cmd = [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"]
    cmd += ["-p", "asyncio", "-p", "hypothesispytest", "tests"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def bytecode(rounds: int) -> None:
    _collect_cpu(True)  # writes the .pyc files the bytecode rounds read
    without: list[float] = []
    with_: list[float] = []
    for _ in range(rounds):
        without.append(_collect_cpu(False))
        _collect_cpu(True)  # writes them again
        with_.append(_collect_cpu(True))
    print(
        f"pytest collection: no bytecode {min(without):.1f} s CPU, bytecode {min(with_):.1f} s CPU "
        f"(best of {rounds}, the whole suite)"
    )


def main() -> None:
    if sys.argv[1:2] == ["--bytecode"]:
        bytecode(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    test_file = sys.argv[2] if len(sys.argv) > 2 else "tests/eval/test_eval_gate.py"
    auto: list[float] = []
    explicit: list[float] = []
    for r in range(rounds):
        for mode in (True, False) if r % 2 else (False, True):
            (explicit if mode else auto).append(_collect(test_file, mode))
    print(
        f"pytest start-up: autoload {min(auto):.2f} s, explicit plugins {min(explicit):.2f} s "
        f"(best of {rounds}, collecting {test_file})"
    )


if __name__ == "__main__":
    main()
