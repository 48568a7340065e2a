"""ragas adapter: samples from records, offline metrics (Chinese too), NaN/failure accounting, and
the LLM metrics against a loopback OpenAI-compatible judge that really reads the prompts."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.datasets import CorpusDoc, Dataset, QueryItem
from rag_lab.eval.ragas_adapter import (
    OFFLINE_METRICS,
    SEGMENTED_METRICS,
    JudgeConfig,
    RagasError,
    RagasSample,
    ascore_samples,
    contains_han,
    metric_tokens,
    samples_from_records,
    score_samples,
)
from rag_lab.eval.runner import QueryRecord
from tests.models.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

CHAT = "/v1/chat/completions"


def sample(qid: str = "q", **kw: Any) -> RagasSample:
    base = dict(
        user_input="who built the lighthouse?",
        retrieved_contexts=["Mara Quill built the lighthouse."],
        retrieved_context_ids=["d1"],
        reference="Mara Quill",
        reference_context_ids=["d1"],
        reference_contexts=["Mara Quill built the lighthouse."],
        response="Mara Quill",
    )
    base.update(kw)
    return RagasSample(qid=qid, **base)


def test_samples_from_records_strip_citations_and_use_gold_texts() -> None:
    ds = Dataset(
        "t",
        path=None,
        corpus=[CorpusDoc("d1", "alpha text"), CorpusDoc("d2", "beta text")],  # type: ignore[arg-type]
        queries=[QueryItem("q1", "what?", ["alpha"], ["d1", "d2"])],
    )
    rec = QueryRecord(
        "q1",
        "what?",
        ["d1", "d2"],
        ["alpha", "a"],
        retrieved_doc_ids=["d2"],
        context_ids=["c9", "c8"],
        context_doc_ids=["d2", "d2"],
        contexts=["beta text", "more beta"],
        answer='It is alpha <kb doc="x" chunk_id="c9" /> .',
    )
    (s,) = samples_from_records([rec], ds)
    assert s.to_dict() == {
        "qid": "q1",
        "user_input": "what?",
        "retrieved_contexts": ["beta text", "more beta"],
        "retrieved_context_ids": ["d2", "d2"],
        "reference": "alpha",
        "reference_context_ids": ["d1", "d2"],
        "reference_contexts": ["alpha text", "beta text"],
        "response": "It is alpha.",
    }


def test_offline_metrics_concrete_values() -> None:
    s = sample(
        retrieved_contexts=["Mara Quill built the lighthouse.", "Sourdough bread rises."],
        retrieved_context_ids=["d1", "d9"],
        reference_context_ids=["d1", "d2"],
        reference_contexts=["Mara Quill built the lighthouse.", "Mount Ember erupted in 1921."],
        response="Mara Quill",
    )
    r = score_samples([s], OFFLINE_METRICS)
    v = {m: r.values[m][0] for m in r.metrics}
    assert v["id_context_recall"] == 0.5  # d1 of {d1, d2}
    assert v["id_context_precision"] == 0.5  # d1 of {d1, d9}
    assert v["nonllm_context_recall"] == 0.5  # the first gold text is matched exactly, the second by nothing
    assert v["nonllm_context_precision"] == pytest.approx(1.0)  # relevant context ranked first: AP = 1
    for m in ("string_similarity", "rouge_l", "chrf"):
        assert v[m] == pytest.approx(1.0), m
    # ragas' BleuScore uses sacrebleu's defaults: a two-word answer has no 3- or 4-grams → 0
    assert v["bleu"] == 0.0
    assert r.counts()["bleu"] == {"n": 1, "n_valid": 1, "n_nan": 0, "n_failed": 0}
    seg = score_samples([s], ["bleu_zh", "rouge_l_zh"])  # effective order: identical short answers score 1
    assert seg.values == {"bleu_zh": [pytest.approx(1.0)], "rouge_l_zh": [pytest.approx(1.0)]}


def test_string_metrics_on_different_answers() -> None:
    r = score_samples([sample(reference="Mara Quill", response="Mara Quinn")], ["string_similarity", "rouge_l", "chrf"])
    assert r.values["string_similarity"][0] == pytest.approx(0.8)  # ll → nn: 2 edits over 10 characters
    assert r.values["rouge_l"][0] == pytest.approx(0.5)  # "mara" in common: P = R = 1/2
    assert 0.0 < r.values["chrf"][0] < 1.0


def test_chinese_keeps_ragas_values_and_the_jieba_variants_have_their_own_names() -> None:
    zh = "北京是中国的首都"
    assert contains_han(zh) and not contains_han("Beijing")
    assert metric_tokens(zh) == ["北京", "是", "中国", "的", "首都"]
    r = score_samples(
        [sample(reference=zh, response=zh, retrieved_contexts=[zh], reference_contexts=[zh])],
        OFFLINE_METRICS + SEGMENTED_METRICS,
    )
    v = {m: r.values[m][0] for m in r.metrics}
    # what ragas itself computes: rouge_score's tokenizer drops every Han character and the
    # unsegmented string is one BLEU token, so identical Chinese strings score 0 on both
    assert v["rouge_l"] == 0.0 and v["bleu"] == 0.0
    for m in set(OFFLINE_METRICS) - {"rouge_l", "bleu"}:
        assert v[m] == pytest.approx(1.0), m
    assert v["rouge_l_zh"] == pytest.approx(1.0) and v["bleu_zh"] == pytest.approx(1.0)
    # word-level ROUGE-L on jieba tokens: 首都 missing → P = 4/4, R = 4/5
    r2 = score_samples([sample(reference=zh, response="北京是中国的")], ["rouge_l_zh"])
    assert r2.values["rouge_l_zh"][0] == pytest.approx(2 * 1.0 * 0.8 / 1.8)


def _ragas_direct(metric: str, ref: str, resp: str) -> float:
    """The value ragas' own metric class gives (no rag_lab code in between)."""
    from ragas.metrics.collections import BleuScore, CHRFScore, NonLLMStringSimilarity, RougeScore

    from rag_lab.asyncutil import run_sync as _run_sync

    cls = {"bleu": BleuScore, "rouge_l": RougeScore, "chrf": CHRFScore, "string_similarity": NonLLMStringSimilarity}
    return _run_sync(lambda: cls[metric]().ascore(reference=ref, response=resp)).value


def test_answer_metrics_equal_ragas_on_the_same_samples_english_and_chinese() -> None:
    """On real dataset samples (HotpotQA answers and CMRC 2018 answers, each scored against a
    sentence of its gold paragraph), every ragas-named metric equals ragas' own class."""
    from rag_lab.eval.datasets import load_dataset

    pairs: list[tuple[str, str]] = []
    for name in ("hotpotqa_hipporag100", "cmrc2018"):
        ds = load_dataset(name)
        texts = {d.id: d.text for d in ds.corpus}
        for q in ds.queries[:12]:
            para = texts[q.gold_ids[0]]
            sent = re.split(r"(?<=[.。!?！？])", para)[0]
            pairs.append((q.answers[0], sent))
            pairs.append((q.answers[0], q.answers[0] + (" indeed" if name.startswith("hotpot") else "。")))
    samples = [sample(f"q{i}", reference=ref, response=resp) for i, (ref, resp) in enumerate(pairs)]
    metrics = ["bleu", "rouge_l", "chrf", "string_similarity"]
    r = score_samples(samples, metrics)
    zh_differs = 0
    for i, (ref, resp) in enumerate(pairs):
        for m in metrics:
            assert r.values[m][i] == pytest.approx(_ragas_direct(m, ref, resp), abs=1e-12), (m, ref, resp)
    seg = score_samples(samples, ["rouge_l_zh"])
    for i, (ref, _resp) in enumerate(pairs):
        if contains_han(ref):
            zh_differs += seg.values["rouge_l_zh"][i] != pytest.approx(r.values["rouge_l"][i])
    assert zh_differs >= 12  # the segmented variant is a different metric on Chinese, hence its name


def test_nan_and_failures_are_counted_not_dropped() -> None:
    samples = [
        sample("ok"),
        sample("no_ref", reference="", reference_context_ids=[], reference_contexts=[]),
        sample("nothing_retrieved", retrieved_contexts=[], retrieved_context_ids=[]),
    ]
    r = score_samples(samples, ["id_context_precision", "id_context_recall", "nonllm_context_recall", "chrf"])
    c = r.counts()
    # ragas' ID precision is NaN without retrieved ids; missing gold makes the sample fail
    assert c["id_context_precision"] == {"n": 3, "n_valid": 1, "n_nan": 1, "n_failed": 1}
    assert r.reasons["id_context_precision"] == {
        "no_ref": "missing input: no reference_context_ids (gold documents)",
        "nothing_retrieved": "the metric returned NaN",
    }
    assert c["id_context_recall"] == {"n": 3, "n_valid": 2, "n_nan": 0, "n_failed": 1}
    assert r.values["id_context_recall"] == [1.0, pytest.approx(math.nan, nan_ok=True), 0.0]
    assert r.values["nonllm_context_recall"][2] == 0.0  # nothing retrieved: no gold text matched
    assert r.failed["chrf"] == ["no_ref"]
    assert r.summary()["id_context_precision"] == 1.0  # mean over the valid sample, with the counts beside it
    assert list(r.per_query().index) == ["ok", "no_ref", "nothing_retrieved"]


def test_unknown_metric_and_llm_metric_without_judge_are_rejected() -> None:
    with pytest.raises(RagasError, match="unknown ragas metric.*rouge_x"):
        score_samples([sample()], ["rouge_x"])
    with pytest.raises(RagasError, match="faithfulness need a judge"):
        score_samples([sample()], ["faithfulness"])


def test_judge_config_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RagasError, match="missing required key 'base_url'"):
        JudgeConfig.from_mapping({"model": "m"})
    with pytest.raises(RagasError, match="unknown key.*colour"):
        JudgeConfig.from_mapping({"model": "m", "base_url": "http://x", "colour": 1})
    with pytest.raises(RagasError, match="'JUDGE_KEY' \\(api_key_env\\) is not set"):
        JudgeConfig.from_mapping({"model": "m", "base_url": "http://x", "api_key_env": "JUDGE_KEY"})
    monkeypatch.setenv("JUDGE_KEY", "secret")
    cfg = JudgeConfig.from_mapping({"model": "m", "base_url": "http://x", "api_key_env": "JUDGE_KEY"})
    assert cfg.api_key == "secret"
    assert "secret" not in repr(cfg) and "secret" not in str(cfg) and "model='m'" in repr(cfg)


@settings(max_examples=25)
@given(st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_string_metrics_stay_in_unit_interval(ref: str, resp: str) -> None:
    if not ref.strip():
        return
    r = score_samples([sample(reference=ref, response=resp)], ["string_similarity", "bleu", "rouge_l", "chrf"])
    for m, vals in r.values.items():
        assert 0.0 <= vals[0] <= 1.0, (m, ref, resp, vals)


# --------------------------------------------------------------------------- LLM judge over loopback


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _input(req: RecordedRequest) -> dict[str, Any]:
    user = req.json["messages"][-1]["content"]
    m = re.search(r"input: (\{.*\})\s*Output:\s*$", user, re.DOTALL)
    assert m, user[-300:]
    return json.loads(m.group(1))


def rule_judge(req: RecordedRequest) -> Reply:
    """A small judge that answers each ragas prompt by word overlap (so scores follow the data)."""
    system = req.json["messages"][0]["content"]
    data = _input(req)
    if '"title": "StatementGeneratorOutput"' in system:
        parts = [p.strip().rstrip(".") + "." for p in data["answer"].split(". ") if p.strip()]
        return Reply.chat(json.dumps({"statements": parts}))
    if '"title": "NLIStatementOutput"' in system:
        ctx = _words(data["context"])
        out = [{"statement": s, "reason": "overlap", "verdict": int(_words(s) <= ctx)} for s in data["statements"]]
        return Reply.chat(json.dumps({"statements": out}))
    if '"title": "ContextPrecisionOutput"' in system:
        return Reply.chat(
            json.dumps({"reason": "overlap", "verdict": int(_words(data["answer"]) <= _words(data["context"]))})
        )
    if '"title": "AnswerRelevanceOutput"' in system:
        noncommittal = int("don't know" in data["response"])
        return Reply.chat(json.dumps({"question": data["response"], "noncommittal": noncommittal}))
    return Reply.error(400, "unexpected prompt")


async def test_llm_metrics_through_a_loopback_judge(embedder: Any) -> None:
    good = sample(
        "good",
        response="Mara Quill built the lighthouse. It stands on granite.",
        retrieved_contexts=["Mara Quill built the lighthouse.", "It stands on granite near the sea."],
        reference="Mara Quill",
    )
    vague = sample(
        "vague",
        response="I don't know who built it.",
        retrieved_contexts=["Sourdough bread rises."],
        reference="Mara Quill",
    )
    with FakeOpenAIServer() as srv:
        for _ in range(40):
            srv.script(CHAT, rule_judge)
        judge = JudgeConfig.from_mapping(
            {"model": "judge-m", "base_url": srv.base_url, "api_key": "k", "concurrency": 2}
        )
        r = await ascore_samples(
            [good, vague], ["faithfulness", "answer_relevancy", "llm_context_precision"], judge=judge, embedder=embedder
        )
        sent = srv.requests_to(CHAT)
    assert all(q.json["model"] == "judge-m" and q.json["response_format"] == {"type": "json_object"} for q in sent)
    assert all(q.headers["authorization"] == "Bearer k" for q in sent)
    assert r.values["faithfulness"] == [1.0, 0.0]  # both statements supported / the vague one is not
    assert r.values["llm_context_precision"][0] == pytest.approx(1.0)  # useful context first
    assert r.values["llm_context_precision"][1] == pytest.approx(0.0)
    vecs = embedder.embed([good.user_input, good.response])
    expected = float(vecs[0] @ vecs[1] / (np.linalg.norm(vecs[0]) * np.linalg.norm(vecs[1])))
    assert r.values["answer_relevancy"][0] == pytest.approx(expected, abs=1e-6)
    assert r.values["answer_relevancy"][1] == 0.0  # noncommittal
    assert r.counts()["faithfulness"]["n_failed"] == 0


async def test_judge_failures_become_counted_nan_with_reasons(embedder: Any) -> None:
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.error(500, "judge exploded"), Reply.chat("this is not JSON"))
        judge = JudgeConfig.from_mapping({"model": "j", "base_url": srv.base_url, "concurrency": 1})
        r = await ascore_samples([sample("a"), sample("b")], ["llm_context_precision"], judge=judge)
    assert r.counts()["llm_context_precision"] == {"n": 2, "n_valid": 0, "n_nan": 0, "n_failed": 2}
    assert math.isnan(r.summary()["llm_context_precision"])
    assert set(r.reasons["llm_context_precision"]) == {"a", "b"}
    assert any("judge exploded" in why or "500" in why for why in r.reasons["llm_context_precision"].values())


def test_judge_from_lab_config() -> None:
    from rag_lab.eval.ragas_adapter import judge_from_lab_config

    assert judge_from_lab_config({"models": {"chat": {"type": "extractive"}}}) is None
    j = judge_from_lab_config(
        {"models": {"judge": {"type": "openai", "model": "m", "base_url": "http://h/v1", "api_key": "k"}}}
    )
    assert (j.model, j.base_url, j.api_key, j.concurrency) == ("m", "http://h/v1", "k", 4)
    with pytest.raises(RagasError, match="models.judge: type 'anthropic' is not supported"):
        judge_from_lab_config({"models": {"judge": {"type": "anthropic", "model": "m", "base_url": "u"}}})


@pytest.mark.slow
def test_eval_cli_with_the_judge_from_the_lab_config(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`rag-lab eval --ragas-llm` end to end: lab config with models.judge → loopback judge → report."""
    import yaml

    from rag_lab.commands.evaluate import main
    from rag_lab.eval.datasets import write_dataset

    write_dataset(
        [
            CorpusDoc("d1", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"),
            CorpusDoc("d2", "Sourdough bread rises thanks to a starter of wild yeast.", "Bread"),
        ],
        [
            QueryItem("q1", "Who built the Brightwater lighthouse?", ["Mara Quill"], ["d1"]),
            QueryItem("q2", "What makes sourdough rise?", ["wild yeast"], ["d2"]),
        ],
        tmp_path / "tiny",
    )
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, *([rule_judge] * 200))
        cfg = tmp_path / "lab.yaml"
        cfg.write_text(
            yaml.safe_dump(
                {
                    "models": {
                        "judge": {
                            "type": "openai",
                            "model": "judge-m",
                            "base_url": srv.base_url,
                            "api_key": "k",
                            "concurrency": 2,
                        }
                    }
                }
            ),
            encoding="utf-8",
        )
        code = main(
            [
                "--config",
                str(cfg),
                "--workspace",
                str(tmp_path / "ws"),
                "eval",
                "--dataset",
                str(tmp_path / "tiny"),
                "--ragas-metric",
                "id_context_recall",
                "--ragas-llm",
                "--out",
                str(tmp_path / "rep"),
                "--quiet",
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        assert srv.requests_to(CHAT) and all(r.json["model"] == "judge-m" for r in srv.requests_to(CHAT))
    report = json.loads((tmp_path / "rep" / "eval_tiny.json").read_text(encoding="utf-8"))
    counts = report["suites"][0]["counts"]
    for m in ("faithfulness", "answer_relevancy", "llm_context_precision", "id_context_recall"):
        assert counts[m]["n"] == 2 and counts[m]["n_valid"] + counts[m]["n_nan"] + counts[m]["n_failed"] == 2, (
            m,
            counts[m],
        )
    assert counts["llm_context_precision"]["n_valid"] == 2 and counts["id_context_recall"]["n_valid"] == 2
    assert 0.0 <= report["suites"][0]["summary"]["faithfulness"] <= 1.0
