"""Start `make lab`'s launcher (``python -m rag_lab.lab.launch``) headless on a free loopback
port and wait until JupyterLab answers; used by the JupyterLab HTTP and browser tests."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

from rag_lab.lab.launch import free_port

ROOT = Path(__file__).resolve().parents[2]


class JupyterLab:
    def __init__(self, port: int, token: str, log: Path) -> None:
        self.port = port
        self.token = token
        self.log = log
        self.base_url = f"http://127.0.0.1:{port}"

    def get(self, path: str, **kw) -> httpx.Response:
        headers = {"Authorization": f"token {self.token}"}
        return httpx.get(self.base_url + path, headers=headers, timeout=30, **kw)

    def delete(self, path: str) -> httpx.Response:
        return httpx.delete(self.base_url + path, headers={"Authorization": f"token {self.token}"}, timeout=60)

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}token={self.token}"


@contextmanager
def running_jupyterlab(
    notebooks: Path,
    workspace: Path,
    log_dir: Path,
    demo_docs: int = 60,
    timeout_s: float = 180,
    extra: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
):
    """JupyterLab serving ``notebooks`` (demo KB in ``workspace``, a slice of ``demo_docs``);
    ``extra`` goes to ``jupyter lab`` after ``--``; ``extra_env`` is added to the server's (and so its
    kernels') environment."""
    port, token = free_port(), secrets.token_hex(16)
    log = log_dir / f"jupyterlab-{port}.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["JUPYTER_CONFIG_DIR"] = str(log_dir / "jupyter-config")  # no user settings leak in
    env["JUPYTERLAB_SETTINGS_DIR"] = str(log_dir / "lab-settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(log_dir / "lab-workspaces")
    env.update(extra_env or {})
    cmd = [
        sys.executable,
        "-m",
        "rag_lab.lab.launch",
        "--no-browser",
        "--port",
        str(port),
        "--token",
        token,
        "--workspace",
        str(workspace),
        "--notebooks",
        str(notebooks),
        "--demo-docs",
        str(demo_docs),
    ]
    if extra:
        cmd += ["--", *extra]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
    server = JupyterLab(port, token, log)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the launcher exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if server.get("/api/status").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not answer within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
