"""Start `make lab`'s launcher (``python -m rag_lab.lab.launch``) headless on a free loopback
port and wait until JupyterLab answers; used by the JupyterLab HTTP and browser tests."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

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


def chromium_path() -> str:
    """Debian's chromium (``RAG_LAB_CHROMIUM`` names another); the test fails, saying how to install it, without one."""
    found = os.environ.get("RAG_LAB_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("the JupyterLab browser tests need Debian's chromium: apt-get install -y chromium")
    return found


@contextmanager
def browser_context() -> Iterator[object]:
    """A Playwright browser context (1400 × 1000) on :func:`chromium_path`, headless (no browser
    download); fails, saying how to install it, without the playwright package."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the JupyterLab browser tests need playwright: pip install 'playwright>=1.45' (the dev extra)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            yield ctx
        finally:
            ctx.close()
            browser.close()
