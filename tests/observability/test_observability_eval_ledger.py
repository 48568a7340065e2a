from __future__ import annotations

import pytest

from rag_lab.eval.report import render_markdown
from rag_lab.eval.runner import SuiteSpec, evaluate_suites
from rag_lab.lab import Lab


async def test_evaluation_reports_sum_the_ledger(tmp_path):
    lab = Lab.from_config({"prices": {"all-MiniLM-L6-v2-int8": {"input_per_1m": 1_000_000.0}}}, workspace=tmp_path)
    report = await evaluate_suites(lab, [SuiteSpec("hotpotqa_hipporag100", n_queries=3, max_docs=12)], progress=False)
    suite = report.suites[0]
    totals = suite.ledger_totals()
    assert totals["model_calls"] == {"chat": 3, "embedding": 3, "rerank": 3}
    # only the embedding model has a price ($1 per token): the cost is the questions' embedding tokens
    from rag_lab.models.extractive import estimate_tokens

    questions = [r.question for r in suite.records]
    assert totals["cost_usd"] == pytest.approx(sum(estimate_tokens(q) for q in questions))
    assert totals["tokens_in"] == sum(r.tokens_in for r in suite.records) > 0
    md = render_markdown(report)
    assert "Ledger: model calls 3 chat, 3 embedding, 3 rerank;" in md
