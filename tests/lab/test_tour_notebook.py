"""The guided tour (notebook 01), read from its committed outputs (no execution): the question is
printed, every stage the tour teaches visibly changes something, MMR picks differ across λ, the
gold funnel is shown and the diff between two params is not empty.

The notebook's cells print one summary line per stage (``STAGE <event>: …``, written by
:func:`rag_lab.lab.tour.stage_change`) and a few tagged lines (``MMR λ=…``, ``THRESHOLD``,
``COMPOSITE``, ``TOP-K``, ``FUNNEL``, ``PARAMS DIFF``); the assertions parse those."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from rag_lab.lab.tour import load_tour_dataset

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_pipeline_event_by_event.ipynb"

#: the stages the tour has to show at work, and what their line must report
STAGES = {
    "load_history": r"state\.history",
    "query_understand": r"state\.diagnostics\.query_understand",
    "chunk_search_parallel": r"search_result \+[1-9]",
    "chunk_rerank": r"search_result→rerank_result \+\d+ -[1-9]",
    "chunk_merge": r"rerank_result→merge_result .*text [1-9]",
    "filter_top_k": r"merge_result \+0 -[1-9]",
    "into_chat_message": r"state\.rendered_contexts",
    "chat_completion_stream": r"state\.diagnostics\.chat_messages",
}


@pytest.fixture(scope="module")
def text() -> str:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "01 is not executed (run build_notebooks.py)"
    out = []
    for c in code:
        for o in c.get("outputs", []):
            assert o.output_type != "error", f"01: a cell failed: {o.get('ename')}: {o.get('evalue')}"
        # one print may arrive split over several stream outputs: a cell's stream is one text
        out.append("".join(o.text for o in c.get("outputs", []) if o.output_type == "stream"))
        for o in c.get("outputs", []):
            if o.output_type in ("execute_result", "display_data"):
                out.append(o.data.get("text/plain", ""))
                out.append(o.data.get("text/html", ""))
    return "\n".join(out)


def _line(text: str, prefix: str) -> str:
    found = [ln for ln in text.splitlines() if ln.startswith(prefix)]
    assert found, f"01 prints no line starting {prefix!r}"
    return found[0]


def test_the_question_is_printed(text: str) -> None:
    q = load_tour_dataset().queries[0]
    assert _line(text, "QUESTION:") == f"QUESTION: {q.question}"


@pytest.mark.parametrize("stage", list(STAGES))
def test_each_stage_changes_something(text: str, stage: str) -> None:
    line = _line(text, f"STAGE {stage}:")
    assert "no change" not in line, line
    assert re.search(STAGES[stage], line), line


def test_every_stage_has_its_line_in_pipeline_order(text: str) -> None:
    order = [m.group(1) for m in re.finditer(r"^STAGE (\w+):", text, re.M)]
    assert [s for s in order if s in STAGES] == list(STAGES)


def test_threshold_cuts_and_composite_reorders(text: str) -> None:
    m = re.search(r"THRESHOLD [\d.]+: (\d+) of (\d+) candidates kept", text)
    assert m and 0 < int(m.group(1)) < int(m.group(2)), m
    m = re.search(r"COMPOSITE: (\d+) of \d+ survivors change rank", text)
    assert m and int(m.group(1)) > 0


def test_mmr_picks_differ_across_lambda(text: str) -> None:
    picks = re.findall(r"^MMR λ=([\d.]+): (\[.*\])$", text, re.M)
    assert len(picks) >= 3
    assert len({p for _, p in picks}) >= 2, picks
    assert int(re.search(r"MMR distinct pick lists: (\d+)", text).group(1)) >= 2


def test_top_k_cuts(text: str) -> None:
    m = re.search(r"TOP-K: (\d+) contexts → (\d+)", text)
    assert m and int(m.group(1)) > int(m.group(2))


def test_the_answer_cites(text: str) -> None:
    assert "<kb doc=" in _line(text, "ANSWER:")


def test_the_gold_funnel_is_shown(text: str) -> None:
    _line(text, "FUNNEL")
    for gold in load_tour_dataset().queries[0].gold_ids:
        assert re.search(rf"{gold}\s+(vector|fused|mmr|final)", text), gold
    assert re.search(r"FUNNEL at λ = 1\.0: lost \{'\w+': 'mmr'\}", text)


def test_the_params_diff_is_not_empty(text: str) -> None:
    line = _line(text, "PARAMS DIFF:")
    m = re.match(r"PARAMS DIFF: \+(\d+) -(\d+) rescored (\d+)", line)
    assert m and sum(map(int, m.groups())) > 0, line
    assert "request.params.mmr_lambda" in line


def test_the_tour_data_is_a_valid_dataset() -> None:
    from rag_lab.eval.datasets import load_dataset
    from rag_lab.lab.tour import TOUR_DATA

    ds, tour = load_dataset(TOUR_DATA), load_tour_dataset()
    assert [d.id for d in ds.corpus] == [d["id"] for d in tour.corpus]
    assert ds.queries[0].question == tour.queries[0].question and ds.queries[0].gold_ids == tour.queries[0].gold_ids
