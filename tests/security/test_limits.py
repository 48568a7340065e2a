"""Finding 7 (request side) and 10: oversized bodies and queries, deeply nested JSON, NUL and
lone surrogates, against the real server on loopback. Each answer is a 4xx naming the field;
nothing is generated."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from benchmarks.stream_reliability import ServerThread

Q = "When was the lighthouse built?"


@pytest.fixture(scope="module")
def limited(tmp_path_factory, docs_dir):
    """A keyless server with the default limits, and one with small configured limits."""
    from rag_lab.lab import Lab
    from rag_lab.stream.server import create_app

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("limits_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    small = {"max_body_bytes": 4096, "max_query_chars": 50, "max_json_depth": 4}
    with ServerThread(create_app(lab, server={})) as default, ServerThread(create_app(lab, server=small)) as tight:
        yield default, tight


def post(srv, body: bytes | None = None, json_body=None, **kw) -> httpx.Response:
    srv.generations_before = len(srv.service.generations)
    with httpx.Client(timeout=60, base_url=srv.url) as c:
        if json_body is not None:
            return c.post("/knowledge-chat/s-limits", json=json_body, **kw)
        return c.post("/knowledge-chat/s-limits", content=body, headers={"content-type": "application/json"}, **kw)


def check(r: httpx.Response, status: int, field: str, fragment: str, srv) -> None:
    assert r.status_code == status, r.text[:300]
    body = r.json()
    assert body["success"] is False and body["field"] == field and fragment in body["error"], body
    assert len(r.content) < 1000  # the answer never echoes the input
    assert len(srv.service.generations) == getattr(srv, "generations_before", 0)  # nothing started


def test_a_10_mb_query_is_refused_with_413_before_it_is_read(limited):
    default, _ = limited
    big = json.dumps({"query": "x" * 10_000_000}).encode()
    check(post(default, big), 413, "body", "request body is larger than 1048576 bytes (server.max_body_bytes)", default)

    def chunks():  # no Content-Length: counted while streaming
        yield b'{"query": "'
        for _ in range(40):
            yield b"y" * 65536
        yield b'"}'

    default.generations_before = len(default.service.generations)
    with httpx.Client(timeout=60, base_url=default.url) as c:
        r = c.post("/knowledge-chat/s-limits", content=chunks(), headers={"content-type": "application/json"})
    check(r, 413, "body", "larger than 1048576 bytes", default)


def test_query_length_and_the_configured_limits(limited):
    default, tight = limited
    check(
        post(default, json_body={"query": "q" * 8001}),
        400,
        "query",
        "query: 8001 characters is more than 8000",
        default,
    )
    check(post(tight, json_body={"query": "q" * 51}), 400, "query", "more than 50 (server.max_query_chars)", tight)
    check(post(tight, json_body={"query": Q, "pad": "p" * 5000}), 413, "body", "larger than 4096 bytes", tight)
    r = post(tight, json_body={"query": Q, "kb": "demo"})
    assert r.status_code == 200 and "1874" in r.text


def test_deep_json_is_a_400_not_a_500(limited):
    default, tight = limited
    deep = b'{"query": "q", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    check(post(default, deep), 400, "body", "nested deeper than 32 levels", default)
    medium = {"query": Q, "x": json.loads("[" * 40 + "]" * 40)}
    check(post(default, json_body=medium), 400, "body", "nested deeper than 32 levels (server.max_json_depth)", default)
    check(post(tight, json_body={"query": Q, "x": [[[[1]]]]}), 400, "body", "deeper than 4 levels", tight)


@pytest.mark.parametrize(
    "raw, field, fragment",
    [
        (b'{"query": "hello\\u0000world"}', "query", "query: contains a NUL character at position 5"),
        (b'{"query": "lone \\ud800 surrogate"}', "query", "query: contains a lone surrogate U+D800"),
        (b'{"query": "q", "kb": ["demo\\udfff"]}', "kb", "kb[0]: contains a lone surrogate U+DFFF"),
        (b'{"query": "q", "\\ud801": 1}', "body", "body key: contains a lone surrogate U+D801"),
        (b'{"query": "caf\\xe9"}', "body", "request body is not valid JSON"),
    ],
)
def test_nul_lone_surrogates_and_bad_utf8_are_refused(limited, raw, field, fragment):
    default, _ = limited
    check(post(default, raw), 400, field, fragment, default)


def test_valid_unicode_still_passes(limited):
    default, _ = limited
    r = post(default, b'{"query": "When was the lighthouse built? \\ud83d\\ude00 \xc3\xa9t\xc3\xa9", "kb": "demo"}')
    assert r.status_code == 200 and "1874" in r.text


def test_server_config_is_validated():
    from rag_lab.stream.auth import AuthConfigError
    from rag_lab.stream.server_config import ServerConfig

    for cfg, msg in (
        ({"max_body_bytes": 0}, "server.max_body_bytes: expected an integer in [1,"),
        ({"max_query_chars": "9"}, "server.max_query_chars: expected an integer"),
        ({"max_json_depth": True}, "server.max_json_depth"),
        ({"auto_create_sessions": "yes"}, "server.auto_create_sessions: expected true or false"),
        ({"api_key": {}}, "server: unknown key(s) api_key"),
    ):
        with pytest.raises(AuthConfigError, match=re.escape(msg)):
            ServerConfig.from_config(cfg, {})
