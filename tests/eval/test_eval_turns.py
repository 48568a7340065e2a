"""Retrieval per conversation turn (``eval --per-turn``) and the query rewrite's effect on it
(``eval --rewrite-effect``): worked values, and end to end against a loopback chat model that
rewrites follow-up questions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_lab.eval.records import QueryRecord
from rag_lab.eval.turns import format_effect, format_turns, per_turn, rewrite_effect
from tests.models.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

CHAT = "/v1/chat/completions"


def _rec(qid: str, turn: int, searched: str = "") -> QueryRecord:
    return QueryRecord(qid, "", ["d"], [], turn=turn, search_query=searched)


def test_per_turn_means_and_unscored_questions() -> None:
    rows = [{"qid": "a", "ndcg@10": 1.0}, {"qid": "b", "ndcg@10": 0.5}, {"qid": "c", "ndcg@10": 0.0}]
    recs = [_rec("a", 1), _rec("b", 1), _rec("c", 3), _rec("nogold", 2)]  # "nogold" has no row: not scored
    got = per_turn(rows, recs, ["ndcg@10"])
    assert [(t.turn, t.n, t.means) for t in got] == [(1, 2, {"ndcg@10": 0.75}), (3, 1, {"ndcg@10": 0.0})]
    assert format_turns(got, ["ndcg@10"]).splitlines()[1:] == ["   1     2     0.7500", "   3     1     0.0000"]


def test_rewrite_effect_pairs_questions_turn_by_turn() -> None:
    with_rows = [{"qid": "a", "recall@10": 1.0}, {"qid": "b", "recall@10": 1.0}, {"qid": "c", "recall@10": 1.0}]
    without_rows = [{"qid": "a", "recall@10": 1.0}, {"qid": "b", "recall@10": 0.0}, {"qid": "c", "recall@10": 0.0}]
    with_recs = [_rec("a", 1, "q a"), _rec("b", 2, "b rewritten"), _rec("c", 2, "c rewritten")]
    without_recs = [_rec("a", 1, "q a"), _rec("b", 2, "b as asked"), _rec("c", 2, "c as asked")]
    first, second = rewrite_effect(with_rows, with_recs, without_rows, without_recs, "recall@10")
    assert (first.turn, first.n, first.delta, first.rewritten, first.ci) == (1, 1, 0.0, 0, (0.0, 0.0))
    assert (second.turn, second.n, second.with_rewrite, second.without, second.delta) == (2, 2, 1.0, 0.0, 1.0)
    assert second.rewritten == 2 and second.ci == (1.0, 1.0)  # both pairs gain 1: no spread
    assert format_effect([second], "recall@10").splitlines()[-1] == (
        "   2     2         2   1.0000   0.0000  +1.0000  [+1.0000, +1.0000]"
    )
    # a question only one side scored does not pair
    assert rewrite_effect(with_rows, with_recs, without_rows[:1], without_recs[:1], "recall@10")[0].turn == 1
    assert len(rewrite_effect(with_rows, with_recs, without_rows[:1], without_recs[:1], "recall@10")) == 1


def _dataset(folder: Path) -> Path:
    from rag_lab.eval.datasets import CorpusDoc, QueryItem, write_dataset

    write_dataset(
        [
            CorpusDoc("lh", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"),
            CorpusDoc("sd", "Sourdough bread rises thanks to wild yeast in the starter.", "Sourdough"),
            CorpusDoc("fr", "The harbour ferry leaves at nine every morning for the island.", "Ferry"),
        ],
        [
            QueryItem("q1", "Who built the Brightwater lighthouse?", ["Mara Quill"], ["lh"]),
            QueryItem("q2", "And in which year?", ["1874"], ["lh"]),
        ],
        folder,
    )
    turn = {"question": "Who built the Brightwater lighthouse?", "answer": "Mara Quill built it."}
    (folder / "history.jsonl").write_text(json.dumps({"query_id": "q2", "turns": [turn]}) + "\n", encoding="utf-8")
    return folder


def _chat(req: RecordedRequest) -> Reply:
    """Query understanding: a follow-up (a conversation in the prompt) is rewritten, a first
    question kept; every other call is the answer."""
    text = json.dumps(req.json["messages"])
    if "no_document_attached" not in text:
        return Reply.chat("Mara Quill built it in 1874.")
    if "And in which year?" in text:
        return Reply.chat(json.dumps({"rewrite_query": "In which year was the Brightwater lighthouse built?"}))
    return Reply.chat(json.dumps({"rewrite_query": "Who built the Brightwater lighthouse?"}))


@pytest.mark.slow
def test_eval_per_turn_and_rewrite_effect_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    ds = _dataset(tmp_path / "conv")
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, *([_chat] * 40))
        chat: dict[str, Any] = {"type": "openai", "model": "m", "base_url": srv.base_url, "api_key": "k"}
        cfg = tmp_path / "lab.yaml"
        cfg.write_text(yaml.safe_dump({"models": {"chat": {**chat, "max_retries": 0}}}), encoding="utf-8")
        argv = ["--config", str(cfg), "--workspace", str(tmp_path / "ws"), "eval", "--dataset", str(ds)]
        argv += ["--out", str(tmp_path / "reports"), "--name", "conv", "--quiet", "--rewrite-effect"]
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "conv, per turn:" in out and "ndcg@10, with and without the query rewrite:" in out
    data = json.loads((tmp_path / "reports" / "conv.turns.json").read_text(encoding="utf-8"))
    (suite,) = data.values()
    assert [(t["turn"], t["n"]) for t in suite["per_turn"]] == [(1, 1), (2, 1)]
    effect = {e["turn"]: e for e in suite["rewrite_effect.recall@10"]}
    assert effect[1]["rewritten"] == 0 and effect[2]["rewritten"] == 1  # only the follow-up was rewritten
    # asked as it stands, "And in which year?" finds nothing; rewritten, it finds the lighthouse
    assert (effect[2]["with_rewrite"], effect[2]["without"], effect[2]["delta"]) == (1.0, 0.0, 1.0)
    report = json.loads((tmp_path / "reports" / "conv.json").read_text(encoding="utf-8"))
    recs = {r["qid"]: r for r in report["suites"][0]["records"]}
    assert (recs["q1"]["turn"], recs["q2"]["turn"]) == (1, 2)
    assert recs["q2"]["search_query"] == "In which year was the Brightwater lighthouse built?"


def test_rewrite_effect_refuses_a_fixed_rewrite_param(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    argv = ["--workspace", str(tmp_path / "ws"), "eval", "--dataset", "x", "--rewrite-effect"]
    assert main([*argv, "--param", "enable_rewrite=false"]) == 2
    assert "--rewrite-effect compares with and without the rewrite" in capsys.readouterr().err
