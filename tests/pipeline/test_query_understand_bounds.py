"""Query understanding against an endpoint that honours schema bounds (a llama-server: it answers
/props): the strings of the schema are bounded to fit the token cap, a rewrite that reached its
maxLength was cut and is dropped, and a reply that is not the object logs one warning naming the
stage and the query kept. Another endpoint gets the schema without bounds."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from rag_lab.pipeline.understanding.prompt import allowed_intents
from tests.models.fake_openai import FakeOpenAIServer, Reply
from tests.models.test_real_model_path import CHAT, _lab, _qu

Q = "who built the lighthouse?"
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}


def _reply(rewrite: str) -> Reply:
    return Reply.chat(json.dumps({"rewrite_query": rewrite, "intent": "kb_search", "image_description": ""}))


def test_bounded_schema_and_a_rewrite_cut_at_its_max_length(tmp_path: Path, docs_dir: Path) -> None:
    with FakeOpenAIServer() as srv:
        srv.script("/props", Reply.json(LLAMA_PROPS))
        lab = _lab(tmp_path, srv.base_url, docs_dir)
        srv.script(CHAT, _reply("who designed and built the Brightwater lighthouse?"), Reply.chat("ok"))
        kept = lab.ask(Q, kb="demo")
        srv.script(CHAT, _reply("lighthouse " * 10 + "l"), Reply.chat("ok"))  # 111 characters: the cap
        cut = lab.ask(Q, kb="demo")
        first = srv.requests_to(CHAT)[0].json
    props = first["response_format"]["json_schema"]["schema"]["properties"]
    # 150 tokens - (8 slack + 3 keys x 4 + the longest allowed intent + quotes + the empty description)
    assert props["rewrite_query"] == {"type": "string", "maxLength": 111}
    assert props["image_description"] == {"type": "string", "maxLength": 0}  # no image: must be empty
    assert props["intent"] == {"type": "string", "enum": allowed_intents(False, False, False)}
    assert kept.state("query_understand").state.rewrite_query == "who designed and built the Brightwater lighthouse?"
    assert cut.state("query_understand").state.rewrite_query == Q
    assert _qu(cut)["rewrite_rejected"] == (
        "the rewrite reached the schema's maxLength of 111 characters (cut, not complete)"
    )
    assert _qu(cut)["parsed"]["intent"] == "kb_search"


def test_another_endpoint_gets_the_schema_without_bounds(tmp_path: Path, docs_dir: Path) -> None:
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv.base_url, docs_dir)
        srv.script(CHAT, _reply("lighthouse " * 10 + "l"), Reply.chat("ok"))
        run = lab.ask(Q, kb="demo")
        first = srv.requests_to(CHAT)[0].json
    props = first["response_format"]["json_schema"]["schema"]["properties"]
    assert props["rewrite_query"] == {"type": "string"} and props["image_description"] == {"type": "string"}
    assert run.state("query_understand").state.rewrite_query == "lighthouse " * 10 + "l"


def test_an_unparsable_reply_logs_one_warning_and_keeps_the_query(
    tmp_path: Path, docs_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv.base_url, docs_dir)
        srv.script(CHAT, Reply.chat('{"type": "response", "body": {"type": "response", "body', finish_reason="length"))
        srv.script(CHAT, Reply.chat("ok"))
        with caplog.at_level(logging.WARNING, logger="rag_lab.pipeline.plugins.query_understand"):
            run = lab.ask(Q, kb="demo")
    assert run.state("query_understand").state.rewrite_query == Q
    assert _qu(run).get("parsed") is None and _qu(run)["finish_reason"] == "length"
    lines = [r.getMessage() for r in caplog.records if r.name == "rag_lab.pipeline.plugins.query_understand"]
    assert lines == [
        "query_understand: the reply is not the schema's object (finish_reason=length, 55 characters); "
        f"kept the original query {Q!r}"
    ]
