"""Captures (save / load / errors / StreamManager export) and the terminal replay (`rag-lab replay`)."""

from __future__ import annotations

import argparse
import io
import json
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.lab.capture import (
    CAPTURE_FORMAT,
    CAPTURE_VERSION,
    CaptureError,
    capture_from_run,
    capture_from_stream_manager,
    load_capture,
    save_capture,
)
from rag_lab.lab.replay import cmd_replay, display_answer, event_delays, replay_to_terminal, stream_state
from rag_lab.types.stream import StreamEvent
from tests.lab.data.make_capture import CAPTURE, PARAMS, QUESTION, build_lab, rows_close


@pytest.fixture(scope="module")
def live(tmp_path_factory, docs_dir):
    lab = build_lab(tmp_path_factory.mktemp("ws_capture"), docs_dir)
    run = lab.ask(QUESTION, kb="demo", params=PARAMS)
    yield lab, run
    lab.workspace.close()


@pytest.fixture(scope="module")
def saved(live, tmp_path_factory) -> Path:
    _, run = live
    return save_capture(run, tmp_path_factory.mktemp("cap") / "run.jsonl")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- round trip -------------------------------------------------------------------------------
def test_round_trip_keeps_everything(live, saved):
    _, run = live
    cap = load_capture(saved)
    assert cap.question == QUESTION and cap.answer == run.answer and "Mara Quill" in cap.answer
    assert [r.to_dict() for r in cap.references] == [r.to_dict() for r in run.references]
    assert [e.to_dict() for e in cap.events] == [e.to_dict() for e in run.events]
    assert cap.event_offsets == list(range(len(run.events)))
    assert [(t.event, t.started_at, t.duration_ms, t.error) for t in cap.timings] == [
        (t.event, t.started_at, t.duration_ms, t.error) for t in run.timings
    ]
    assert cap.params == run.params and cap.params.rerank_threshold == 0.1
    assert list(cap.snapshots) == list(run.snapshots) == run.stages + ["final"]
    for stage, snap in run.snapshots.items():
        assert cap.snapshots[stage].to_dict() == snap.to_dict(), stage
    assert (cap.session_id, cap.message_id, cap.stages) == (run.session_id, run.message_id, run.stages)
    assert cap.total_ms == run.total_ms and cap.warnings == []
    assert cap.state("chunk_rerank").state.rerank_result[0].id == run.state("chunk_rerank").state.rerank_result[0].id
    with pytest.raises(KeyError, match="no snapshot for 'web_fetch'"):
        cap.state("web_fetch")


def test_file_layout(saved, live):
    _, run = live
    lines = [json.loads(line) for line in _lines(saved)]
    head = lines[0]
    assert head["kind"] == "header" and head["format"] == CAPTURE_FORMAT == "rag_lab.capture"
    assert head["version"] == CAPTURE_VERSION == 1 and head["rag_lab_version"] == "0.1.0"
    assert datetime.fromisoformat(head["created_at"]).tzinfo is not None
    kinds = [r["kind"] for r in lines]
    assert kinds[1:3] == ["request", "params"] and kinds[-1] == "end"
    assert lines[-1]["records"] == len(lines) - 1
    events = [r for r in lines if r["kind"] == "event"]
    assert [r["offset"] for r in events] == list(range(len(run.events)))
    assert all(isinstance(r["timestamp"], float) and r["timestamp"] > 0 for r in events)
    assert [r["stage"] for r in lines if r["kind"] == "snapshot"] == list(run.snapshots)
    snap = next(r for r in lines if r["kind"] == "snapshot")
    assert "params" not in snap["chat"]["request"]  # stored once, in the params record
    assert {r["name"] for r in lines if r["kind"] == "extra"} == {"mmr_inputs"}


def test_capture_from_run_equals_save_then_load(live, saved):
    _, run = live
    a, b = capture_from_run(run), load_capture(saved)
    assert [e.to_dict() for e in a.events] == [e.to_dict() for e in b.events]
    assert a.extras == b.extras and a.answer == b.answer
    assert {k: v.to_dict() for k, v in a.snapshots.items()} == {k: v.to_dict() for k, v in b.snapshots.items()}


def test_resaving_a_capture_is_stable(saved, tmp_path):
    cap = load_capture(saved)
    again = load_capture(save_capture(cap, tmp_path / "again.jsonl"))
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in cap.events]
    assert again.extras == cap.extras and again.params == cap.params
    assert {k: v.to_dict() for k, v in again.snapshots.items()} == {k: v.to_dict() for k, v in cap.snapshots.items()}


def test_stored_capture_is_current(live):
    """The stored test capture matches what the code produces now (else rerun make_capture.py)."""
    _, run = live
    stored = load_capture(CAPTURE)
    hint = "regenerate with: .venv/bin/python tests/lab/data/make_capture.py"
    assert stored.answer == run.answer, hint
    assert [r.id for r in stored.references] == [r.id for r in run.references], hint
    assert rows_close(
        stored.state("chunk_rerank").state.diagnostics["rerank"]["rows"],
        run.state("chunk_rerank").state.diagnostics["rerank"]["rows"],
    ), hint  # scores within SCORE_TOLERANCE (see there why not bit for bit)
    assert stored.extras["fusion"][0]["fusion"] == "rrf"


# -- errors -----------------------------------------------------------------------------------
def test_newer_version_is_refused(saved, tmp_path):
    lines = _lines(saved)
    head = json.loads(lines[0])
    head["version"] = CAPTURE_VERSION + 1
    bad = _write(tmp_path / "new.jsonl", [json.dumps(head)] + lines[1:])
    with pytest.raises(
        CaptureError, match=r"new\.jsonl:1: capture format version 2 is newer than this rag_lab reads"
    ) as ei:
        load_capture(bad)
    assert ei.value.line == 1 and ei.value.path == str(bad)


@pytest.mark.parametrize(
    "line_no, text, message",
    [
        (5, '{"kind": "event", "offset": 3, ', r":5: corrupt line: invalid JSON"),
        (4, "[1, 2, 3]", r":4: corrupt line: expected a JSON object, got list"),
        (6, '{"kind": "mystery"}', r":6: unknown record kind 'mystery'"),
        (3, "", r":3: empty line"),
    ],
)
def test_corrupt_lines_name_file_and_line(saved, tmp_path, line_no, text, message):
    lines = _lines(saved)
    lines[line_no - 1] = text
    bad = _write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(CaptureError, match=r"bad\.jsonl" + message) as ei:
        load_capture(bad)
    assert ei.value.line == line_no


def test_invalid_records_name_the_line_and_field(saved, tmp_path):
    lines = _lines(saved)
    n = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "event")
    ev = json.loads(lines[n])
    del ev["offset"]
    bad = _write(tmp_path / "b1.jsonl", lines[:n] + [json.dumps(ev)] + lines[n + 1 :])
    with pytest.raises(CaptureError, match=rf":{n + 1}: event record: missing field 'offset'"):
        load_capture(bad)

    ev["offset"] = 0
    swapped = lines[: n + 1] + [json.dumps({**json.loads(lines[n + 1]), "offset": 0})] + lines[n + 2 :]
    with pytest.raises(CaptureError, match=rf":{n + 2}: event offset 0 is not after the previous one \(0\)"):
        load_capture(_write(tmp_path / "b2.jsonl", swapped))

    params = json.loads(lines[2])
    params["params"]["mmr_lambda"] = 5
    with pytest.raises(CaptureError, match=r":3: invalid params record: .*mmr_lambda.*= 5"):
        load_capture(_write(tmp_path / "b3.jsonl", lines[:2] + [json.dumps(params)] + lines[3:]))


def test_truncated_and_tampered_files(saved, tmp_path):
    lines = _lines(saved)
    cut = _write(tmp_path / "cut.jsonl", lines[:-3])
    with pytest.raises(CaptureError, match=rf"cut\.jsonl:{len(lines) - 3}: truncated capture: no end record"):
        load_capture(cut)
    missing = _write(tmp_path / "gap.jsonl", lines[:4] + lines[5:])
    with pytest.raises(
        CaptureError,
        match=rf"gap\.jsonl:{len(lines) - 1}: end record counts {len(lines) - 1} records but {len(lines) - 2}",
    ):
        load_capture(missing)
    extra = _write(tmp_path / "after.jsonl", lines + [lines[1]])
    with pytest.raises(CaptureError, match=rf":{len(lines) + 1}: record after the end record"):
        load_capture(extra)


def test_not_a_capture(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(CaptureError, match=r"empty\.jsonl: empty file"):
        load_capture(tmp_path / "empty.jsonl")
    (tmp_path / "other.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(CaptureError, match=r"other\.jsonl:1: not a rag_lab capture"):
        load_capture(tmp_path / "other.jsonl")
    (tmp_path / "text.jsonl").write_text("hello\n")
    with pytest.raises(CaptureError, match=r"text\.jsonl:1: not a rag_lab capture: line 1 is not JSON"):
        load_capture(tmp_path / "text.jsonl")
    with pytest.raises(CaptureError, match=r"nope\.jsonl: no such capture file"):
        load_capture(tmp_path / "nope.jsonl")
    assert issubclass(CaptureError, ValueError)  # the CLI prints ValueErrors and exits 2


def test_unknown_params_fields_are_tolerated_with_a_warning(saved, tmp_path):
    lines = _lines(saved)
    params = json.loads(lines[2])
    params["params"]["future_knob"] = 3
    cap = load_capture(_write(tmp_path / "w.jsonl", lines[:2] + [json.dumps(params)] + lines[3:]))
    assert cap.warnings == ["params: ignored unknown params field(s) future_knob"]
    assert cap.params.rerank_threshold == 0.1


# -- StreamManager export -----------------------------------------------------------------------
def test_export_from_memory_stream_manager(live, tmp_path):
    lab, run = live
    cap = capture_from_stream_manager(lab.stream_manager, run.session_id, run.message_id, question=run.question)
    assert [e.to_dict() for e in cap.events] == [e.to_dict() for e in run.events]
    assert cap.answer == run.answer and [r.id for r in cap.references] == [r.id for r in run.references]
    assert cap.snapshots == {} and cap.timings == [] and cap.params is None
    back = load_capture(save_capture(cap, tmp_path / "sm.jsonl"))
    assert back.answer == run.answer and back.event_offsets == list(range(len(run.events)))

    tail = capture_from_stream_manager(lab.stream_manager, run.session_id, run.message_id, from_offset=5)
    assert tail.event_offsets[0] == 5 and [e.to_dict() for e in tail.events] == [e.to_dict() for e in run.events[5:]]
    assert load_capture(save_capture(tail, tmp_path / "tail.jsonl")).event_offsets == list(range(5, len(run.events)))

    with pytest.raises(CaptureError, match="no stream events for session 'nope' message 'x' from offset 0"):
        capture_from_stream_manager(lab.stream_manager, "nope", "x")


class _LogOnly:
    """Any object with get_events works (the Redis manager has the same two methods)."""

    def __init__(self, events: list[StreamEvent]) -> None:
        self.events = events

    def get_events(self, session_id, message_id, from_offset=0):
        return self.events[from_offset:], len(self.events)


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_event = st.builds(
    StreamEvent,
    id=st.text(min_size=1, max_size=8),
    type=st.sampled_from(["answer", "thinking", "references", "tool_call", "error", "complete"]),
    content=_text,
    done=st.booleans(),
    timestamp=st.floats(min_value=1.0, max_value=4e9, allow_nan=False),
    data=st.dictionaries(st.text(max_size=5), st.one_of(_text, st.integers(), st.booleans()), max_size=3),
)


@settings(max_examples=60)
@given(events=st.lists(_event, min_size=1, max_size=12))
def test_round_trip_of_arbitrary_events(tmp_path_factory, events):
    events = [e for e in events if e.type != "references"]  # references carry result dicts
    if not events:
        return
    cap = capture_from_stream_manager(_LogOnly(events), "s", "m")
    path = save_capture(cap, tmp_path_factory.mktemp("prop") / "c.jsonl")
    back = load_capture(path)
    assert [e.to_dict() for e in back.events] == [e.to_dict() for e in events]
    assert back.answer == "".join(e.content for e in events if e.type == "answer")


# -- stream state and terminal replay -----------------------------------------------------------
def _ev(type_: str, content: str = "", done: bool = False, t: float = 0.0, **data) -> StreamEvent:
    return StreamEvent(id=type_, type=type_, content=content, done=done, timestamp=100.0 + t, data=data)


REFS = [
    {"id": "kb:a#c0", "knowledge_title": "A", "score": 0.9},
    {"id": "kb:b#c0", "knowledge_title": "B", "score": 0.5},
]
EVENTS = [
    _ev("tool_call", "Calling tool: query_understand", t=0.0, tool_call_id="q", tool_name="query_understand"),
    _ev(
        "tool_result",
        "",
        t=0.1,
        tool_call_id="q",
        tool_name="query_understand",
        success=True,
        duration_ms=100,
        rewrite_query="who built it",
        output="understood",
    ),
    _ev("tool_call", "Calling tool: knowledge_search", t=0.2, tool_call_id="k", tool_name="knowledge_search"),
    _ev(
        "error",
        "index offline",
        t=0.3,
        tool_call_id="k",
        tool_name="knowledge_search",
        success=False,
        duration_ms=40,
        error="index offline",
    ),
    _ev("references", t=0.4, references=REFS),
    _ev("thinking", "let me ", t=0.5),
    _ev("thinking", "think", True, t=0.6),
    _ev("answer", 'Built by Quill <kb doc="A" chunk_', t=1.0),
    _ev("answer", 'id="kb:b#c0" /> in 1874 <kb chunk_id="zz" />.', t=1.5),
    _ev("answer", "", True, t=1.6),
    _ev("complete", "", True, t=1.7, total_duration_ms=1700),
]


def test_stream_state_folds_events():
    s = stream_state(EVENTS, 4)
    assert [(w.tool, w.status, w.duration_ms) for w in s.windows] == [
        ("query_understand", "done", 100),
        ("knowledge_search", "failed", 40),
    ]
    assert s.windows[0].details["rewrite_query"] == "who built it" and s.errors == ["index offline"]
    assert s.references == [] and s.answer == "" and not s.complete
    s = stream_state(EVENTS, 8)
    assert s.thinking == "let me think" and s.references == REFS
    assert s.answer == 'Built by Quill <kb doc="A" chunk_' and s.display_answer == "Built by Quill "
    s = stream_state(EVENTS)
    assert s.display_answer == "Built by Quill [2] in 1874 [?]." and s.complete and s.answer_done
    assert s.position == s.total == 11 and s.elapsed_s == pytest.approx(1.7)
    assert stream_state(EVENTS, 0).windows == [] and stream_state(EVENTS, 99).position == 11


def test_display_answer_unescapes_chunk_ids():
    refs = [{"id": 'a"b&c'}]
    assert display_answer('x <kb chunk_id="a&quot;b&amp;c" />', refs) == "x [1]"
    assert display_answer("x <kbd>y</kbd>", refs) == "x <kbd>y</kbd>"


_pieces = st.sampled_from(
    ["a", " ", "<", "kb", "<kb", ' chunk_id="kb:a#c0"', ' chunk_id="zz"', " />", ">", "k", "b", "x."]
)


@given(parts=st.lists(_pieces, max_size=25), cut=st.integers(min_value=0, max_value=25))
def test_displayed_answer_only_grows(parts, cut):
    """While an answer streams, what is shown is always a prefix of what is shown at the end."""
    full = "".join(parts)
    prefix = "".join(parts[:cut])
    assert display_answer(full, REFS, partial=False).startswith(display_answer(prefix, REFS, partial=True))


def test_replay_to_terminal_prints_the_stream_as_it_arrived():
    from rag_lab.lab.capture import Capture

    cap = Capture(question="Who built it?", events=EVENTS)
    out = io.StringIO()
    waits: list[float] = []
    final = replay_to_terminal(cap, speed=2.0, out=out, sleep=waits.append, max_delay=0.2)
    assert out.getvalue() == (
        "Q: Who built it?\n"
        "… query understand\n"
        "✓ query understand (100 ms): rewrite_query=who built it, understood\n"
        "… knowledge search\n"
        "✗ knowledge search (40 ms): index offline\n"
        "References (2):\n"
        "  [1] 0.900 A (kb:a#c0)\n"
        "  [2] 0.500 B (kb:b#c0)\n"
        "[thinking]\n"
        "let me think\n"
        "Answer:\n"
        "Built by Quill [2] in 1874 [?].\n"
        "— complete in 1700 ms\n"
    )
    # gaps halved by speed 2, the 0.4 s gap before the answer cut to max_delay 0.2
    assert waits == pytest.approx([0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.2, 0.2, 0.05, 0.05])
    assert final.complete and final.display_answer.endswith("[?].")
    assert event_delays(EVENTS, 0) == [0.0] * len(EVENTS)
    with pytest.raises(ValueError, match="speed must be >= 0"):
        event_delays(EVENTS, -1)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rag-lab")
    cmd_replay.add_to(ap.add_subparsers(dest="command", required=True))
    return ap


def test_replay_command(saved, capsys):
    args = _parser().parse_args(["replay", str(saved), "--speed", "0"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    cap = load_capture(saved)
    assert out.startswith(f"Q: {QUESTION}\n… query understand\n")
    assert "References (2):\n  [1] 0.857 The Brightwater Lighthouse" in out
    assert display_answer(cap.answer, cap.references, partial=False) in out
    assert out.rstrip().endswith("ms")


def test_replay_command_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["replay", "x.jsonl", "--speed", "-1"])
    assert "argument --speed: -1 must be >= 0 (0 replays without delays)" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"kind": "header", "format": "rag_lab.capture", "version": 9}\n')
    args = _parser().parse_args(["replay", str(tmp_path / "bad.jsonl")])
    with pytest.raises(CaptureError, match=r"bad\.jsonl:1: capture format version 9 is newer"):
        args.func(args)


def test_capture_rows_compare_within_the_stated_tolerance():
    from tests.lab.data.make_capture import SCORE_TOLERANCE

    row = {"id": "c1", "model_score": 0.76097113, "selected": True}
    assert rows_close([row], [{**row, "model_score": 0.76097125}])  # two float32 ulps apart
    assert not rows_close([row], [{**row, "model_score": 0.76097113 + 10 * SCORE_TOLERANCE}])
    assert not rows_close([row], [{**row, "selected": False}]) and not rows_close([row], [])
