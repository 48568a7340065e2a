"""Replay widgets (player, composite threshold slider, MMR λ slider, tabs) and the HTML export,
all offline from captures; the thinking stream comes from a real run against the loopback
OpenAI-compatible fake server."""

from __future__ import annotations

import html
import io
import json
import re

import pytest

pytest.importorskip("ipywidgets")

from rag_lab.lab import Lab
from rag_lab.lab.capture import Capture, capture_from_run, load_capture
from rag_lab.lab.frames import mmr_inputs, mmr_selection
from rag_lab.lab.replay import display_answer, replay_to_terminal, stream_state
from rag_lab.lab.widgets import (
    CompositeView,
    MMRView,
    StreamPlayer,
    export_replay_html,
    replay_page_data,
    workbench,
)
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import StreamEvent
from tests.lab.data.make_capture import CAPTURE, QUESTION
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def cap() -> Capture:
    return load_capture(CAPTURE)


@pytest.fixture(scope="module")
def thinking_cap(tmp_path_factory, docs_dir) -> Capture:
    """A real run whose model thinks before answering (reasoning deltas, then a cited answer)."""
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
                "params": {"enable_rewrite": False},
            },
            workspace=tmp_path_factory.mktemp("ws_thinking"),
        )
        lab.ingest(docs_dir, kb="demo", progress=False)
        srv.script(
            CHAT,
            Reply.chat(
                ["It was built by ", "Mara Quill", ' <ref id="c1"/>', "."], reasoning=["The document ", "names Quill."]
            ),
        )
        run = lab.ask(QUESTION, kb="demo")
        lab.workspace.close()
    return capture_from_run(run)


def test_player_scrubs_the_stream(cap):
    player = StreamPlayer(cap)
    n = len(cap.events)
    assert player.position == n and player.slider.max == n and player.play.max == n
    final = display_answer(cap.answer, cap.references, partial=False)
    assert html.escape(final) in player.answer.value and "Mara Quill" in final
    assert "[1] The Brightwater Lighthouse" in player.references.value
    assert player.status.value == f"event {n}/{n} · +{player.state.elapsed_s * 1000:.0f} ms · complete"
    assert player.progress.value.count("<li") == 2 and "✓ knowledge search" in player.progress.value

    player.show(0)
    assert player.position == 0 and player.slider.value == 0
    assert player.references.value == "<i>no references yet</i>" and player.progress.value == "<i>no progress yet</i>"

    first_answer = next(i for i, e in enumerate(cap.events) if e.type == "answer")
    player.slider.value = first_answer + 1  # as a user drags the slider
    assert player.position == first_answer + 1
    partial = stream_state(cap.events, first_answer + 1).display_answer
    assert partial and html.escape(partial) in player.answer.value and final.startswith(partial)

    player.play.value = 4  # the Play widget drives the slider through the link
    assert player.slider.value == 4 and player.position == 4
    assert [e.type for e in cap.events[:4]] == ["agent_query", "tool_call", "tool_result", "tool_call"]
    assert "… knowledge search" in player.progress.value  # the window is open, not closed yet


def test_player_shows_thinking_separately(thinking_cap):
    events = thinking_cap.events
    thinking = [i for i, e in enumerate(events) if e.type == "thinking"]
    assert thinking and "".join(events[i].content for i in thinking) == "The document names Quill."
    player = StreamPlayer(thinking_cap)
    player.show(thinking[-1] + 1)
    assert "The document names Quill." in player.thinking.value
    assert player.state.answer == "" and "Quill" not in player.answer.value
    player.show(len(events))
    assert "The document names Quill." in player.thinking.value
    assert "It was built by Mara Quill [1]." in player.answer.value
    assert "The document" not in player.answer.value

    out = io.StringIO()
    replay_to_terminal(thinking_cap, speed=0, out=out)
    text = out.getvalue()
    assert "[thinking]\nThe document names Quill.\nAnswer:\nIt was built by Mara Quill [1].\n" in text
    assert text.index("References (") < text.index("[thinking]")


def test_composite_view_threshold_slider(cap):
    view = CompositeView(cap)
    ids = [r.id for r in cap.state("chunk_search_parallel").state.search_result]
    assert view.slider.value == pytest.approx(0.1) and view.survivors == ids
    before = view.picture.value
    assert before.startswith("<svg") and 'data-state="threshold=0.10 kept=4"' in before
    view.slider.value = 0.7
    assert [s.split(":")[1] for s in view.survivors] == ["lighthouse.md#c0"]
    assert (
        "<b>1 of 4</b> candidates survive threshold 0.70" in view.summary.value
        and "<code>ok</code>" in view.summary.value
    )
    assert 'data-state="threshold=0.70 kept=1"' in view.picture.value and view.picture.value != before
    assert "threshold 0.70: 1 of 4 survive (ok)" in view.picture.value  # the picture says what the text says
    view.slider.value = 0.95
    assert view.outcome.outcome == "fallback_top1" and len(view.survivors) == 1


def test_mmr_view_lambda_slider(cap):
    view = MMRView(cap)
    inputs = mmr_inputs(cap)
    assert view.slider.value == pytest.approx(0.7)
    assert view.picks == [s["id"] for s in mmr_selection(inputs, 0.7)]
    assert "same picks as the run" in view.summary.value
    view.slider.value = 0.0
    assert view.picks == [s["id"] for s in mmr_selection(inputs, 0.0)]
    assert "2 pick(s) differ from the run&#x27;s λ=0.7" in view.summary.value
    assert "<b>volcano.html#c0</b>" in view.summary.value
    assert view.picture.value.startswith("<svg") and 'data-state="lambda=0.00 picks=' in view.picture.value


def _bars(svg: str, kind: str) -> list[tuple[float, float]]:
    """(width in px, data-value) of the SVG's bars of one kind, in drawing order."""
    found = re.findall(rf'<rect [^>]*width="([0-9.]+)"[^>]*data-kind="{kind}" data-value="([-0-9.e]+)"', svg)
    return [(float(w), float(v)) for w, v in found]


def test_the_composite_picture_draws_the_rows_at_scale(cap):
    """The threshold view's SVG: one model bar per candidate, 220 px per unit of model score, the
    stacked parts at 240 px per unit, the threshold line where the threshold is, the survivors
    coloured and the others grey (the ladder's outcome at that threshold)."""
    from rag_lab.lab.frames import rerank_rows, rerank_threshold_outcome
    from rag_lab.lab.plots.svg_views import composite_svg

    rows = rerank_rows(cap)
    svg = composite_svg(cap, 0.7)
    model = _bars(svg, "model")
    assert [v for _, v in model] == pytest.approx([float(r["model_score"]) for r in rows], abs=1e-6)
    assert all(w == pytest.approx(220 * v, abs=0.06) for w, v in model)
    parts = _bars(svg, "base_part")
    assert [v for _, v in parts] == pytest.approx([float(r["base_part"]) for r in rows], abs=1e-6)
    assert all(w == pytest.approx(240 * v, abs=0.06) for w, v in parts)
    line = re.search(r'<line x1="([0-9.]+)"[^>]*data-kind="line" data-value="0.7"', svg)
    assert line is not None and float(line.group(1)) == pytest.approx(190 + 220 * 0.7, abs=0.06)
    kept = rerank_threshold_outcome(cap, 0.7).kept
    colours = re.findall(r'fill="(#[0-9A-F]+)"[^>]*data-kind="model"', svg)
    assert [c == "#4C72B0" for c in colours] == [i in kept for i in range(len(rows))]
    assert "threshold 0.70: 1 of 4 survive (ok)" in svg and svg.count("filtered") == 3


def test_the_mmr_picture_draws_each_lambdas_picks(cap):
    """The λ view's SVG: the steps at λ (relevance and redundancy bars with the trace's values),
    and one grid row per λ whose cells are the picks' relevance ranks, outlined where they differ
    from the run's λ."""
    from rag_lab.lab.plots.svg_views import mmr_svg

    inputs = mmr_inputs(cap)
    scores = [float(x) for x in inputs["scores"]]
    rank = {i: n for n, i in enumerate(sorted(range(len(scores)), key=lambda i: (-scores[i], i)), 1)}
    svg = mmr_svg(cap, lam=0.0, lambdas=(0.0, 1.0))
    steps = mmr_selection(inputs, 0.0)
    assert [v for _, v in _bars(svg, "relevance")] == pytest.approx([s["relevance"] for s in steps], abs=1e-6)
    assert [v for _, v in _bars(svg, "redundancy")] == pytest.approx([s["redundancy"] for s in steps], abs=1e-6)
    assert f'data-state="lambda=0.00 picks={",".join(str(rank[s["index"]]) for s in steps)}"' in svg
    for lam in (0.0, 0.7, 1.0):  # the run's λ is always a row
        label = f"λ={lam:g}" + (" (run)" if lam == 0.7 else "")
        assert f">{html.escape(label)}" in svg
    cells = re.findall(r'stroke="(black|none)" stroke-width="1.5"/><text [^>]*>#(\d+)</text>', svg)
    k = int(inputs["k"])
    rows = [cells[i : i + k] for i in range(0, len(cells), k)]
    run_row = [rank[s["index"]] for s in mmr_selection(inputs, 0.7)]
    for row, lam in zip(rows, (0.0, 0.7, 1.0)):
        picks = [rank[s["index"]] for s in mmr_selection(inputs, lam)]
        assert [int(n) for _, n in row] == picks
        assert [o == "black" for o, _ in row] == [a != b for a, b in zip(picks, run_row)]


def test_workbench_tabs(cap):
    import ipywidgets as W

    tab = workbench(cap)
    assert tab.titles == ("Stream", "Composite score", "MMR", "Fusion", "Merge", "Timings")
    assert all(isinstance(c, W.VBox) for c in tab.children)
    bare = Capture(question="q", events=cap.events, snapshots={}, timings=cap.timings)
    tab = workbench(bare)
    assert isinstance(tab.children[0], W.VBox) and isinstance(tab.children[5], W.VBox)
    for i in (1, 2, 3, 4):
        assert isinstance(tab.children[i], W.HTML) and "not available for this capture" in tab.children[i].value
    assert "fusion_trace(lab, run)" in tab.children[3].value


def _embedded(page: str) -> dict:
    m = re.search(r'<script id="capture-data" type="application/json">(.*?)</script>', page, re.DOTALL)
    assert m is not None
    return json.loads(m.group(1))


def test_export_replay_html(cap, tmp_path):
    path = export_replay_html(cap, tmp_path / "out" / "replay.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "http://" not in page and "https://" not in page
    assert _embedded(page) == json.loads(json.dumps(replay_page_data(cap)))
    assert len(_embedded(page)["events"]) == len(cap.events)
    final = display_answer(cap.answer, cap.references, partial=False)
    noscript = page[page.index("<noscript>") : page.index("</noscript>")]
    assert html.escape(final) in noscript and "[1] The Brightwater Lighthouse" in noscript


def test_export_escapes_hostile_text(tmp_path):
    evil = "</script><img src=x onerror=alert(1)> & <!-- \u2028"
    ref = SearchResult(id="kb:x#c0", content=evil, knowledge_title=evil)
    cap = Capture(
        question=evil,
        answer=evil,
        references=[ref],
        events=[StreamEvent("a", "answer", evil, False, 1.0), StreamEvent("a", "answer", "", True, 2.0)],
    )
    page = export_replay_html(cap, tmp_path / "evil.html").read_text(encoding="utf-8")
    assert "<img" not in page and page.count("</script>") == 2  # the data block and the player
    assert _embedded(page)["answer"] == evil and _embedded(page)["events"][0]["content"] == evil
