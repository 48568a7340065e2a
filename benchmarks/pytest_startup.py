"""pytest's start-up with every installed plugin autoloaded (langsmith, anyio, … come with the
eval extras) vs only the plugins the suite uses, as the Makefile runs it
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 -p asyncio -p hypothesispytest -p nbval``), taking turns.

Usage: .venv/bin/python benchmarks/pytest_startup.py [ROUNDS] [TEST_FILE]

Each round collects TEST_FILE (default tests/eval/test_eval_gate.py) with ``--collect-only`` in a
new process both ways. Prints ``pytest start-up: autoload X s, explicit plugins Y s (best of N)``.
"""

from __future__ import annotations

import os
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
        cmd[3:3] = ["-p", "asyncio", "-p", "hypothesispytest", "-p", "nbval"]
    else:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
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
