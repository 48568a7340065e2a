"""An endpoint that accepts connections and never answers: query understanding and the answer
stream each give up after ``models.chat.timeout_s`` (connect + first token), naming the stage, the
setting and the seconds, and the question ends with the fallback answer. The defaults bound a
question on such an endpoint to 30 s: 15 s for each of the two calls."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_lab.lab import Lab
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.models.registry import build_chat_model
from rag_lab.types.params import PipelineParams


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback TCP server that accepts every connection, reads what comes and never replies."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            held.append(conn)  # kept open, never answered

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        srv.close()


def test_hung_endpoint_fails_each_call_after_timeout_s(silent_server: str, tmp_path: Path, docs_dir: Path) -> None:
    lab = Lab.from_config(
        {
            "models": {
                "embedder": {"type": "onnx-minilm"},
                "reranker": {"type": "embedding-rescorer"},
                "chat": {"type": "openai", "model": "m", "base_url": silent_server, "timeout_s": 1.5},
            }
        },
        workspace=tmp_path,
    )
    lab.ingest(docs_dir, kb="demo", progress=False)
    run = lab.ask("who built the lighthouse?", kb="demo")
    qu = run.state("query_understand").state.diagnostics["query_understand"]
    assert qu["error"] == "query_understand: the model did not answer within models.chat.timeout_s=1.5 s"
    assert run.state("query_understand").state.rewrite_query == "who built the lighthouse?"
    assert run.error == "chat_completion_stream: no first token within models.chat.timeout_s=1.5 s"
    assert run.is_fallback and run.answer.strip()


def test_default_limits_bound_a_question_to_30_s() -> None:
    model = build_chat_model({"type": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    assert isinstance(model, OpenAIChatModel) and model.timeout_s == 15.0
    qu_limit = min(PipelineParams().query_understand_timeout_s, model.timeout_s)
    assert qu_limit + model.timeout_s == 30.0  # query understanding, then the answer's first token
    with pytest.raises(ValueError, match=r"timeout_s must be a number of seconds > 0, got 0"):
        build_chat_model({"type": "openai", "model": "m", "base_url": "http://x/v1", "timeout_s": 0})
