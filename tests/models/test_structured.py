"""Bounded JSON schemas (rag_lab.models.structured) and llama-server's /props probe
(rag_lab.models.endpoint_props)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from rag_lab.models.endpoint_props import PROBE_TIMEOUT_S, context_window, server_props, server_root
from rag_lab.models.structured import bounded_schema, inline_refs, json_schema_format, string_budget
from tests.models.fake_openai import FakeOpenAIServer, Reply


class Verdict(BaseModel):
    statement: str
    reason: str
    verdict: int


class Verdicts(BaseModel):
    statements: list[Verdict]


class Statements(BaseModel):
    statements: list[str]


def test_pydantic_refs_are_inlined_and_every_string_and_array_is_bounded() -> None:
    out = bounded_schema(Verdicts.model_json_schema(), 1024)
    assert "$defs" not in out and "$ref" not in json.dumps(out)
    arr = out["properties"]["statements"]
    item = arr["items"]
    # fixed cost: 8 slack + 4 for the key + 8 items x (3 keys x 4 + 2 for the verdict) = 124;
    # 16 strings share the other 900 tokens: 56 each, less their 2 quotes
    assert arr["maxItems"] == 8
    assert item["properties"]["statement"]["maxLength"] == 54
    assert item["properties"]["reason"]["maxLength"] == 54
    assert "maxLength" not in item["properties"]["verdict"]
    assert item["additionalProperties"] is False and out["additionalProperties"] is False


def test_a_small_budget_takes_fewer_items_before_shorter_strings() -> None:
    out = bounded_schema(Verdicts.model_json_schema(), 384)
    arr = out["properties"]["statements"]
    assert (arr["maxItems"], arr["items"]["properties"]["reason"]["maxLength"]) == (7, 17)
    assert bounded_schema(Statements.model_json_schema(), 384)["properties"]["statements"]["items"] == {
        "type": "string",
        "maxLength": 44,  # (384 - 8 - 4) // 8 - 2
    }


def test_existing_bounds_and_enums_are_kept_and_counted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string", "maxLength": 0},
            "c": {"type": "string", "enum": ["yes", "no"]},
        },
    }
    out = bounded_schema(schema, 150)
    assert out["properties"]["b"] == {"type": "string", "maxLength": 0}
    assert out["properties"]["c"] == {"type": "string", "enum": ["yes", "no"]}
    # 150 - (8 slack + 3 keys x 4 + 2 for b's quotes + 5 for "yes") = 123, less a's 2 quotes
    assert out["properties"]["a"]["maxLength"] == 121 == string_budget(schema, 150, 8)


def test_budget_too_small_or_recursive_schema_is_refused() -> None:
    # one item: 26 fixed tokens (slack, key, 3 keys, verdict) + 2 strings of 16 characters and quotes
    with pytest.raises(ValueError, match=r"a reply of 40 tokens cannot hold this schema .* at least 62 tokens"):
        bounded_schema(Verdicts.model_json_schema(), 40)
    loop = {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}
    with pytest.raises(ValueError, match="recursive definition 'N'"):
        inline_refs(loop)
    with pytest.raises(ValueError, match=r"\$ref '#/\$defs/X' names no definition"):
        inline_refs({"$ref": "#/$defs/X"})
    with pytest.raises(ValueError, match="must be >= 1"):
        bounded_schema({"type": "string"}, 0)


def test_response_format_wraps_the_schema() -> None:
    assert json_schema_format("S", {"type": "object"}) == {
        "type": "json_schema",
        "json_schema": {"name": "S", "strict": True, "schema": {"type": "object"}},
    }


def test_props_of_a_llama_server_and_of_another_endpoint() -> None:
    with FakeOpenAIServer() as srv:
        srv.script("/props", Reply.json({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}))
        props = server_props(srv.base_url)
        again = server_props(srv.base_url)  # cached: one request
        asked = len(srv.requests_to("/props"))
    assert server_root(srv.base_url) == srv.root_url
    assert context_window(props) == 2048 and again is props and asked == 1
    with FakeOpenAIServer() as other:  # no /props (404): not a llama-server
        assert server_props(other.base_url) is None
    assert context_window(None) is None
    assert context_window({"default_generation_settings": {"n_ctx": True}}) is None


def test_a_props_probe_without_an_answer_in_time_is_not_cached(caplog: pytest.LogCaptureFixture) -> None:
    """No answer within the timeout is a fault, not "another endpoint": the next call asks again."""
    with FakeOpenAIServer() as srv:
        srv.script("/props", Reply.json({"default_generation_settings": {"n_ctx": 512}}, delay=2.0))
        with caplog.at_level(logging.WARNING, logger="rag_lab.models.endpoint_props"):
            assert server_props(srv.base_url, timeout=0.2) is None
        assert [r.getMessage() for r in caplog.records] == [
            f"{srv.root_url}/props: no answer within 0.2 s; schema bounds are not used this time"
        ]
        srv.script("/props", Reply.json({"default_generation_settings": {"n_ctx": 512}}))
        assert context_window(server_props(srv.base_url, timeout=0.2)) == 512  # asked again: now cached
        assert context_window(server_props(srv.base_url, timeout=0.2)) == 512
    assert PROBE_TIMEOUT_S == 30.0


def _largest(schema: dict[str, Any]) -> Any:
    t = schema.get("type")
    if "enum" in schema:
        return max(schema["enum"], key=lambda v: len(str(v)))
    if t == "string":
        return "x" * schema["maxLength"]
    if t == "integer":
        return 1
    if t == "array":
        return [_largest(schema["items"])] * schema["maxItems"]
    return {k: _largest(v) for k, v in schema["properties"].items()}


@pytest.mark.parametrize("max_tokens", [200, 384, 1024, 4096])
def test_the_largest_instance_fits_one_character_per_token(max_tokens: int) -> None:
    """Counting every character of a string value as a token and the JSON around it as the module
    does, the largest instance stays within the budget."""
    out = bounded_schema(Verdicts.model_json_schema(), max_tokens)
    inst = _largest(out)
    string_chars = sum(len(s["statement"]) + len(s["reason"]) + 4 for s in inst["statements"])
    structure = 8 + 4 + len(inst["statements"]) * (3 * 4 + 2)
    assert string_chars + structure <= max_tokens
    assert Verdicts.model_validate(inst)
