"""`make lab`'s first start: from the command to a JupyterLab that answers, demo KB ingested.

Usage: .venv/bin/python benchmarks/lab_start.py [ROUNDS]

Each round, taking turns in one run:

* **make lab, first start** — ``python -m rag_lab.lab.launch`` on a new, empty workspace: it
  ingests the 50-document demo KB (the chunks' vectors, into the new workspace's own vector cache,
  so every text is embedded) and starts JupyterLab over ``notebooks/``;
* **make lab, next start** — the same workspace again (the KB is there: nothing to ingest);
* **jupyter lab alone** — ``python -m jupyterlab`` over ``notebooks/`` with the same options, no
  workspace: the floor a launcher cannot go below.

Timed from the process start to the first ``200`` of ``/api/status`` (polled every 50 ms); the
server is then stopped. Printed: each path's median over the rounds, and the last line
``lab_start: ...`` for scripts. The goal is a first start of at most 15 s.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_lab.lab.launch import free_port, jupyter_command  # noqa: E402

GOAL_S = 15.0


def _time_to_ready(cmd: list[str], env: dict[str, str], port: int, token: str, log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}: see {log}")
            try:
                r = httpx.get(
                    f"http://127.0.0.1:{port}/api/status", headers={"Authorization": f"token {token}"}, timeout=1
                )
                if r.status_code == 200:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    times: dict[str, list[float]] = {"make lab, first start": [], "make lab, next start": [], "jupyter lab alone": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ)
        base.pop("RAG_LAB_VECTOR_CACHE", None)  # the workspace's own cache: a new workspace embeds every text
        base["JUPYTER_CONFIG_DIR"] = str(Path(tmp) / "jupyter-config")
        base["JUPYTERLAB_WORKSPACES_DIR"] = str(Path(tmp) / "lab-workspaces")
        for r in range(rounds):
            ws = Path(tmp) / f"ws{r}"
            for label in times:
                port, token = free_port(), secrets.token_hex(8)
                if label.startswith("make lab"):
                    cmd = [sys.executable, "-m", "rag_lab.lab.launch", "--no-browser", "--port", str(port)]
                    cmd += ["--token", token, "--workspace", str(ws), "--notebooks", str(ROOT / "notebooks")]
                else:
                    cmd = jupyter_command(port, ROOT / "notebooks", False, token)
                log = Path(tmp) / f"{label.replace(' ', '_').replace(',', '')}-{r}.log"
                times[label].append(_time_to_ready(cmd, base, port, token, log))
                print(f"round {r + 1}: {label}: {times[label][-1]:.2f} s", flush=True)
            shutil.rmtree(ws, ignore_errors=True)
    med = {label: statistics.median(ts) for label, ts in times.items()}
    for label, m in med.items():
        print(f"{label:<24} median {m:6.2f} s  ({', '.join(f'{t:.2f}' for t in times[label])})")
    first = med["make lab, first start"]
    print(
        f"lab_start: first start {first:.2f} s (goal <= {GOAL_S:.0f} s: {'met' if first <= GOAL_S else 'not met'}), "
        f"next start {med['make lab, next start']:.2f} s, jupyter lab alone {med['jupyter lab alone']:.2f} s"
    )


if __name__ == "__main__":
    main()
