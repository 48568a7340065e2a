from __future__ import annotations

import pytest

from rag_lab.lab import Lab
from rag_lab.observability.ledger import PriceTable
from rag_lab.observability.projection import BudgetExceeded, project_run
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"
QUESTIONS = [
    "Who built the Brightwater lighthouse?",
    "What colour is the crater lake of Mount Ember?",
    "How do bakers feed a sourdough starter?",
]


def test_ledger_tokens_equal_reported_usage_and_projection_counts_match(tmp_path, docs_dir):
    with FakeOpenAIServer() as srv:
        lab = Lab.from_config(
            {
                "models": {
                    "chat": {
                        "type": "openai",
                        "model": "fake",
                        "base_url": srv.base_url,
                        "api_key": "k",
                        "max_retries": 0,
                    }
                },
                "prices": {"fake": {"input_per_1m": 2.0, "output_per_1m": 8.0}},
            },
            workspace=tmp_path,
        )
        lab.ingest(docs_dir, kb="demo", progress=False)
        usages = []
        for i, _ in enumerate(QUESTIONS):
            u1 = {"prompt_tokens": 100 + i, "completion_tokens": 10 + i, "total_tokens": 110 + 2 * i}
            u2 = {"prompt_tokens": 500 + i, "completion_tokens": 40 + i, "total_tokens": 540 + 2 * i}
            usages += [u1, u2]
            srv.script(
                CHAT,
                Reply.chat('{"rewrite_query": "q", "intent": "kb_search"}', usage=u1),
                Reply.chat(["An ", "answer."], usage=u2),
            )
        projected = project_run(lab, QUESTIONS, ["demo"])
        runs = [lab.ask(q, kb="demo") for q in QUESTIONS]

    calls: dict[str, int] = {}
    for r in runs:
        for k, v in r.ledger.calls_by_kind().items():
            calls[k] = calls.get(k, 0) + v
    assert calls == projected.calls == {"chat": 6, "embedding": 3, "rerank": 3}
    chat_calls = [c for r in runs for c in r.ledger.calls if c.kind == "chat"]
    assert sum(c.tokens_in for c in chat_calls) == sum(u["prompt_tokens"] for u in usages)
    assert sum(c.tokens_out for c in chat_calls) == sum(u["completion_tokens"] for u in usages)
    assert not any(c.estimated for c in chat_calls)
    expected_cost = sum(u["prompt_tokens"] * 2.0 + u["completion_tokens"] * 8.0 for u in usages) / 1e6
    assert sum(r.ledger.cost for r in runs) == pytest.approx(expected_cost)
    assert {c.stage for c in chat_calls} == {"query_understand", "chat_completion_stream"}
    frame = runs[0].ledger.stage_frame()
    assert set(frame["stage"]) == set(runs[0].stages) and frame["ms"].ge(0).all()
    assert projected.tokens_in >= sum(u["prompt_tokens"] for u in usages) / 10  # an upper-bound estimate


def test_budget_refuses_a_projection_over_it(tmp_path, docs_dir):
    lab = Lab.from_config({"prices": {"all-MiniLM-L6-v2-int8": {"input_per_1m": 1000.0}}}, workspace=tmp_path)
    lab.ingest(docs_dir, kb="demo", progress=False)
    proj = project_run(lab, QUESTIONS * 100, ["demo"])
    assert proj.calls == {"chat": 300, "embedding": 300, "rerank": 300}  # the extractive model does not rewrite
    with pytest.raises(BudgetExceeded, match="over the budget"):
        proj.check_budget(0.0001)
    proj.check_budget(None)


def test_price_table_matching_and_errors():
    t = PriceTable({"gpt-x": {"input_per_1m": 1.0, "output_per_1m": 4.0}})
    assert t.cost("gpt-x|https://api/v1", 1_000_000, 500_000) == pytest.approx(3.0)
    assert t.cost("other", 10, 10) == 0.0
    with pytest.raises(ValueError, match="prices.bad"):
        PriceTable({"bad": {"input": 1}})
