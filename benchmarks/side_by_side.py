"""One benchmark run on two versions of rag_lab in turn: a given git revision (checked out in a
temporary worktree) and the working tree, alternating ``--rounds`` times so that a change in the
machine's load falls on both alike. Prints the lines of each run that match ``--grep``.

Usage: .venv/bin/python benchmarks/side_by_side.py REV "benchmarks/sweep.py 20 80 540" \
    [--grep "evaluations/s"] [--rounds 2]

The benchmark script is taken from each version's own tree (same name) and runs under this
checkout's virtual environment with ``PYTHONPATH`` set to that tree.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_in(tree: Path, command: str, pattern: re.Pattern[str]) -> list[str]:
    """Run ``command`` (a benchmark script and its arguments) with ``tree`` on ``PYTHONPATH``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, *shlex.split(command)]
    done = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{command} failed in {tree} (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return [line for line in done.stdout.splitlines() if pattern.search(line)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the git revision to compare with (e.g. a commit before a change)")
    ap.add_argument("command", help="the benchmark script and its arguments, relative to the tree")
    ap.add_argument("--grep", default=".", help="regular expression: the output lines to show")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each version, alternating")
    args = ap.parse_args(argv)
    pattern = re.compile(args.grep)
    with tempfile.TemporaryDirectory(prefix="rag_lab_base_") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(base), args.rev], cwd=ROOT, check=True)
        try:
            for r in range(args.rounds):
                for name, tree in ((args.rev, base), ("working tree", ROOT)):
                    for line in run_in(tree, args.command, pattern):
                        print(f"[{name}, run {r + 1}] {line}", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
