"""Finding 9: when the chat model fails (closed port, 500s, garbage, half a stream) the user gets
the fallback answer — the references found, or the fixed text — with the partial text kept, in
bounded time; ``Run.error`` names the failure and ``rag-lab ask`` exits 3. Against a fake
OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import yaml

from benchmarks.stream_reliability import ServerThread, free_port, parse_frames
from rag_lab.lab.lab import CHAT_MODEL_ID
from rag_lab.models.base import StreamChunk
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.observability.ledger import LedgerChatModel
from rag_lab.pipeline.fallback import MODEL_FAILURE_INTRO
from tests.models.fake_openai import FakeOpenAIServer, Reply

Q = "When was the lighthouse built?"
LISTING = MODEL_FAILURE_INTRO + "\n- The Brightwater Lighthouse"


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAIServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def flab(tmp_path_factory, docs_dir):
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("mf_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    yield lab


def use_model(lab, model) -> None:
    lab.services.chat_models[CHAT_MODEL_ID] = LedgerChatModel(model)


MODES = {
    "closed port": (lambda fake: (f"http://127.0.0.1:{free_port()}/v1", None), "cannot connect"),
    "500s": (lambda fake: (fake.base_url, Reply.error(500, "overloaded")), "HTTP 500"),
    "garbage": (
        lambda fake: (fake.base_url, Reply.raw(b"<html>\x00 not an event stream {{{", 200, "text/event-stream")),
        "ended without a finish reason",
    ),
    "half a stream": (
        lambda fake: (
            fake.base_url,
            Reply.chat(["The lighthouse ", "was built ", "in 18", "74 by Mara."], drop_after=4),
        ),
        "broke",
    ),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_failing_model_gives_the_references_fallback_with_the_partial_text(flab, fake, mode):
    make, cause = MODES[mode]
    base_url, reply = make(fake)
    fake.stream_reply = reply
    try:
        use_model(flab, OpenAIChatModel("m", base_url))  # the client's own 2 retries included
        before = len(fake.requests_to("/v1/chat/completions"))
        run = flab.ask(Q, kb="demo", snapshots=False)
        sent = len(fake.requests_to("/v1/chat/completions")) - before
    finally:
        fake.stream_reply = None
    # bounded: the rewrite call, then one answer request and at most the client's two retries, then
    # the fallback (a count, not a wall-clock bound)
    assert sent <= 4 and (sent >= 1 or mode == "closed port")
    assert run.degraded and run.is_fallback and cause in run.error
    assert run.references and run.answer.endswith(LISTING)
    if mode == "half a stream":
        assert run.answer == "The lighthouse was built in 18\n\n" + LISTING  # partial text kept
    else:
        assert run.answer == LISTING
    types = [e.type for e in run.events]
    assert types[-3:] == ["error", "answer", "complete"]  # the spec's error event, then the answer
    last = run.events[-2]
    assert last.done and last.data["is_fallback"] is True and "http" not in last.data["model_error"]
    saved = flab.sessions.find_message(run.session_id, run.message_id)
    assert saved.content == run.answer and saved.is_fallback and saved.is_completed


def test_without_references_or_when_configured_the_fixed_text_is_the_answer(flab, fake):
    use_model(flab, OpenAIChatModel("m", f"http://127.0.0.1:{free_port()}/v1", max_retries=0))
    run = flab.ask(Q, kb="demo", snapshots=False, params={"model_failure_answer": "fixed"})
    assert run.degraded and run.answer == run.params.fallback_response and run.references
    run = flab.ask("zzqx vrrk plooth", kb="demo", snapshots=False, params={"vector_threshold": 0.99})
    assert run.is_fallback and run.answer == run.params.fallback_response


class ErrorThenHang:
    """A model that streams a piece, reports an error, then never says anything again."""

    follows_instructions = False
    supports_vision = False
    model_id = "hang|local"

    async def chat(self, messages, options=None):
        raise ConnectionError("down")

    async def chat_stream(self, messages, options=None):
        yield StreamChunk(response_type="answer", content="Partial ")
        yield StreamChunk(response_type="error", content="upstream reset")
        await asyncio.sleep(60)  # only model_failure_deadline_s can end the wait before this
        yield StreamChunk(response_type="answer", content="never", done=True)


def test_a_stream_that_fails_and_hangs_falls_back_within_the_deadline(flab):
    use_model(flab, ErrorThenHang())
    params = {"model_failure_deadline_s": 0.5, "chat_stream_idle_timeout_s": 3600}
    run = flab.ask(Q, kb="demo", snapshots=False, params=params)
    # the deadline ended the stream: had it waited, "never" would have completed the answer
    assert run.answer == "Partial \n\n" + LISTING and run.error == "upstream reset"


def test_the_server_streams_the_fallback_and_completes(flab, fake):
    from rag_lab.stream.server import create_app

    use_model(flab, OpenAIChatModel("m", f"http://127.0.0.1:{free_port()}/v1", max_retries=0))
    with ServerThread(create_app(flab, server={})) as srv, httpx.Client(timeout=60) as c:
        r = c.post(f"{srv.url}/knowledge-chat/s-mf", json={"query": Q, "kb": "demo"})
    frames = parse_frames(iter(r.text.split("\n")))
    assert [f.type for f in frames[-3:]] == ["error", "answer", "complete"]
    fallback = frames[-2].data
    assert fallback["content"] == LISTING and fallback["data"]["is_fallback"] is True
    assert "127.0.0.1" not in fallback["data"]["model_error"]


def test_rag_lab_ask_prints_the_fallback_and_exits_3(flab, tmp_path, capsys):
    from rag_lab.cli import main

    cfg = tmp_path / "lab.yaml"
    model = {"type": "openai", "model": "m", "base_url": f"http://127.0.0.1:{free_port()}/v1", "max_retries": 0}
    cfg.write_text(yaml.safe_dump({"workspace": str(flab.workspace.root), "models": {"chat": model}}))
    assert main(["--config", str(cfg), "ask", Q, "--kb", "demo", "--quiet"]) == 3
    out, err = capsys.readouterr()
    assert LISTING in out and "degraded: the chat model failed" in err and "cannot connect" in err
