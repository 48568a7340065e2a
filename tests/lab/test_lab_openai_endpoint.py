"""The same pipeline against a loopback OpenAI-compatible server: query understanding JSON,
streamed answer with a citation split across chunks, thinking, usage."""

from __future__ import annotations

import json

from rag_lab.lab import Lab
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"


def _lab(tmp_path, srv, docs_dir, **params):
    lab = Lab.from_config(
        {
            "models": {
                "embedder": {"type": "onnx-minilm"},
                "reranker": {"type": "embedding-rescorer"},
                "chat": {"type": "openai", "model": "fake", "base_url": srv.base_url, "api_key": "k", "max_retries": 0},
            },
            "params": params,
        },
        workspace=tmp_path,
    )
    lab.ingest(docs_dir, kb="demo", progress=False)
    return lab


def test_rewrite_intent_and_streamed_citation(tmp_path, docs_dir):
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv, docs_dir)
        srv.script(
            CHAT,
            Reply.chat(json.dumps({"rewrite_query": "Brightwater lighthouse builder", "intent": "KB-Search"})),
            Reply.chat(["It was built by Mara Quill", " <re", 'f id="c1"/', ">."], reasoning=["look", "ing"]),
        )
        run = lab.ask("who made it?", kb="demo")
        qu = run.state("query_understand").state
        assert qu.rewrite_query == "Brightwater lighthouse builder" and qu.intent == "kb_search"
        first = run.references[0]
        assert run.answer.startswith("It was built by Mara Quill <kb ")
        assert f'chunk_id="{first.id}"' in run.answer and run.answer.endswith(" />.")
        thinking = [e for e in run.events if e.type == "thinking"]
        assert "".join(e.content for e in thinking) == "looking" and thinking[-1].done
        # the model saw aliases only: no internal chunk id in any message
        sent = srv.requests_to(CHAT)[-1].json["messages"]
        assert all(first.id not in m["content"] for m in sent if isinstance(m["content"], str))
        assert any('<chunk id="c1"' in m["content"] for m in sent if isinstance(m["content"], str))


def test_greeting_intent_skips_retrieval(tmp_path, docs_dir):
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv, docs_dir)
        srv.script(
            CHAT, Reply.chat('```json\n{"rewrite_query": "hello", "intent": "greeting"}\n```'), Reply.chat("Hi!")
        )
        run = lab.ask("hello there", kb="demo")
        assert run.answer == "Hi!" and run.references == []
        assert run.state("chunk_search_parallel").state.search_result == []
        system = srv.requests_to(CHAT)[-1].json["messages"][0]["content"]
        assert "greeting" in system.lower() or "warm" in system.lower()


def test_model_error_mid_stream_becomes_an_error_event_then_the_fallback_answer(tmp_path, docs_dir):
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv, docs_dir, enable_rewrite=False)
        srv.script(CHAT, Reply.chat(["partial ", "answer ", "more"], drop_after=2))
        run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
        assert [e.type for e in run.events if e.type == "error"] == ["error"]
        # App. B.15 leaves such a turn without an answer; the model-failure fallback completes it
        assert [e.type for e in run.events][-2:] == ["answer", "complete"] and run.degraded
        assert run.answer.startswith("partial \n\nThe language model could not finish this answer.")


def test_a_stalled_stream_times_out_into_an_error_event(tmp_path, docs_dir):
    """The stream starts, then stalls: the idle limit between chunks ends it (the first chunk has
    models.chat.timeout_s, tested on its own)."""
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv, docs_dir, enable_rewrite=False, chat_stream_idle_timeout_s=0.3)
        srv.piece_delay = 2.0  # every SSE event after the first comes 2 s after the one before
        srv.script(CHAT, Reply.chat(["The lighthouse", "never"]))
        run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
        errors = [e for e in run.events if e.type == "error"]
        assert len(errors) == 1 and "no answer chunk within chat_stream_idle_timeout_s=0.3 s" in errors[0].content
        assert (
            run.is_fallback and "no answer chunk within chat_stream_idle_timeout_s=0.3 s" in run.error
        )  # the fallback answered


def test_a_slow_rewrite_call_times_out_and_keeps_the_original_query(tmp_path, docs_dir):
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv, docs_dir, query_understand_timeout_s=0.3)
        srv.script(
            CHAT,
            Reply.chat('{"rewrite_query": "too late", "intent": "greeting"}', delay=2.0),
            Reply.chat("Mara Quill."),
        )
        run = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
        qu = run.state("query_understand").state
        assert qu.rewrite_query == "Who built the Brightwater lighthouse?" and qu.intent == ""
        assert "did not answer within query_understand_timeout_s=0.3 s" in qu.diagnostics["query_understand"]["error"]
        assert run.references  # retrieval ran
