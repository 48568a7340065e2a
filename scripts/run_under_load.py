"""Run a command beside busy-loop processes that keep CPUs saturated (`make test-under-load`).

    python scripts/run_under_load.py [--busy N] [--max-s S] -- COMMAND ...

Starts ``N`` processes (default: one per CPU) that spin in a pure-Python loop, runs COMMAND, then
stops them; exits with COMMAND's status. The busy processes are bounded: each stops by itself after
``--max-s`` seconds (default 3600) or as soon as this script's process is gone, so none outlives
the run, even when this script is killed.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import subprocess
import sys
import time


def _spin(parent: int, max_s: float) -> None:
    end = time.monotonic() + max_s
    n = 0
    while True:
        n += 1
        if n % 1_000_000 == 0 and (time.monotonic() > end or os.getppid() != parent):
            return


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=os.cpu_count() or 2, help="busy processes (default: CPUs)")
    ap.add_argument("--max-s", type=float, default=3600.0, help="each busy process stops after this (default 3600)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the command to run (after --)")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command given (python scripts/run_under_load.py -- make test)")
    if args.busy < 0 or args.max_s <= 0:
        ap.error(f"--busy must be >= 0 and --max-s > 0, got {args.busy} and {args.max_s}")
    ctx = mp.get_context("fork") if hasattr(os, "fork") else mp.get_context()
    busy = [ctx.Process(target=_spin, args=(os.getpid(), args.max_s), daemon=True) for _ in range(args.busy)]
    for p in busy:
        p.start()
    print(f"run_under_load: {args.busy} busy processes (bounded to {args.max_s:g} s) beside: {' '.join(cmd)}")
    sys.stdout.flush()
    t0 = time.perf_counter()
    try:
        code = subprocess.call(cmd)
    finally:
        for p in busy:
            p.terminate()
        for p in busy:
            p.join(10)
    print(f"run_under_load: exit {code} after {time.perf_counter() - t0:.0f} s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
