"""The judge's json_schema output (rag_lab.eval.ragas_adapter.schema_llm): chosen for a llama-server
(it answers /props), each ragas prompt sent once with the output model's bounded schema at the
judge's temperature and seed, the reply validated; json_object elsewhere; the projection counts
one attempt per call in this mode."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from rag_lab.eval.ragas_adapter import JudgeConfig, RagasError, ascore_samples, project_judge
from rag_lab.eval.ragas_adapter.judge import JUDGE_MAX_ATTEMPTS, resolve_structured_output
from tests.eval.test_eval_ragas import _input, _words, sample
from tests.models.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

CHAT = "/v1/chat/completions"
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}


def schema_judge(req: RecordedRequest) -> Reply:
    """Answers each ragas prompt by word overlap, picking the output by the schema's name."""
    name = req.json["response_format"]["json_schema"]["name"]
    data = _input(req)
    if name == "StatementGeneratorOutput":
        parts = [p.strip().rstrip(".") + "." for p in data["answer"].split(". ") if p.strip()]
        return Reply.chat(json.dumps({"statements": parts}))
    if name == "NLIStatementOutput":
        ctx = _words(data["context"])
        out = [{"statement": s, "reason": "overlap", "verdict": int(_words(s) <= ctx)} for s in data["statements"]]
        return Reply.chat(json.dumps({"statements": out}))
    if name == "ContextPrecisionOutput":
        verdict = int(_words(data["answer"]) <= _words(data["context"]))
        return Reply.chat(json.dumps({"reason": "overlap", "verdict": verdict}))
    return Reply.error(400, f"unexpected schema {name}")


def _judge(srv: FakeOpenAIServer, **kw: Any) -> JudgeConfig:
    return JudgeConfig.from_mapping({"model": "small", "base_url": srv.base_url, "concurrency": 1, **kw})


async def test_a_llama_server_judge_gets_bounded_schemas_once_per_call() -> None:
    good = sample(
        "good",
        response="Mara Quill built the lighthouse. It stands on granite.",
        retrieved_contexts=["Mara Quill built the lighthouse.", "It stands on granite near the sea."],
    )
    with FakeOpenAIServer() as srv:
        srv.script("/props", Reply.json(LLAMA_PROPS))
        for _ in range(10):
            srv.script(CHAT, schema_judge)
        judge = _judge(srv, max_tokens=384)
        assert resolve_structured_output(judge) == "json_schema"
        r = await ascore_samples([good], ["faithfulness", "llm_context_precision"], judge=judge)
        sent = srv.requests_to(CHAT)
    assert r.values["faithfulness"] == [1.0] and r.values["llm_context_precision"] == [pytest.approx(1.0)]
    assert len(sent) == 2 + 2 == r.judge["calls"]  # statements + verdicts, one per context: no re-asks
    first = sent[0].json
    assert [m["role"] for m in first["messages"]] == ["user"]  # no schema pasted into a system prompt
    assert (first["temperature"], first["seed"], first["max_tokens"]) == (0.0, 0, 384)
    fmt = first["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "StatementGeneratorOutput"
    statements = fmt["json_schema"]["schema"]["properties"]["statements"]
    assert (statements["maxItems"], statements["items"]["maxLength"]) == (8, 44)
    verdicts = sent[1].json["response_format"]["json_schema"]["schema"]["properties"]["statements"]
    assert (verdicts["maxItems"], verdicts["items"]["properties"]["reason"]["maxLength"]) == (7, 17)
    assert verdicts["items"]["properties"]["verdict"]["enum"] == [0, 1]  # "the verdict(0/1)": 0 or 1 only
    precision = sent[2].json["response_format"]["json_schema"]["schema"]["properties"]["verdict"]
    assert precision == {**precision, "type": "integer", "enum": [0, 1]}


async def test_a_verdict_outside_0_1_is_nan_with_the_reason() -> None:
    with FakeOpenAIServer() as srv:  # json_object mode: the schema is in the prompt only
        srv.script(CHAT, Reply.chat('{"reason": "r", "verdict": 10000000000}'))
        r = await ascore_samples([sample("a")], ["llm_context_precision"], judge=_judge(srv))
    assert math.isnan(r.values["llm_context_precision"][0])
    assert r.reasons["llm_context_precision"]["a"] == (
        "the metric returned 1e+10, outside [0, 1] (a judge verdict other than 0 or 1)"
    )
    assert r.failed["llm_context_precision"] == ["a"]


async def test_a_reply_that_does_not_validate_is_nan_with_the_reason() -> None:
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat('{"reason": "cut', finish_reason="length"))
        judge = _judge(srv, structured_output="json_schema")
        r = await ascore_samples([sample("a")], ["llm_context_precision"], judge=judge)
        asked = len(srv.requests_to(CHAT))
    assert math.isnan(r.values["llm_context_precision"][0]) and asked == 1
    why = r.reasons["llm_context_precision"]["a"]
    assert why.startswith("JudgeReplyError: ContextPrecisionOutput: the judge's reply does not validate")
    assert "finish_reason=length" in why


async def test_another_endpoint_keeps_json_object_and_the_setting_is_checked() -> None:
    with FakeOpenAIServer() as srv:  # no /props
        judge = _judge(srv)
        assert judge.structured_output == "auto" and resolve_structured_output(judge) == "json_object"
        assert resolve_structured_output(_judge(srv, structured_output="json_schema")) == "json_schema"
    with pytest.raises(RagasError, match="structured_output 'xml' is not one of auto, json_schema, json_object"):
        JudgeConfig.from_mapping({"model": "m", "base_url": "http://x", "structured_output": "xml"})
    with pytest.raises(RagasError, match="seed '1' is not an integer"):
        JudgeConfig.from_mapping({"model": "m", "base_url": "http://x", "seed": "1"})
    assert JudgeConfig.from_mapping({"model": "m", "base_url": "http://x", "seed": None}).seed is None


def test_projection_counts_one_attempt_per_call_with_json_schema() -> None:
    judge = JudgeConfig(model="m", base_url="http://x", max_tokens=100)
    metrics = ["faithfulness", "answer_relevancy", "llm_context_precision"]
    # per sample: 2 (faithfulness) + 3 (answer relevancy's questions) + 4 contexts = 9
    assert project_judge(5, metrics, 4, 50.0, judge, attempts=1) == (45, 45 * 800, 45 * 100)
    assert project_judge(5, metrics, 4, 50.0, judge)[0] == 45 * JUDGE_MAX_ATTEMPTS
