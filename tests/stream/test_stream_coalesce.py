"""Continue-stream replay coalescing (spec Appendix A.2)."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from rag_lab.stream.coalesce import DELTA_TYPES, coalesce_events, is_mergeable
from rag_lab.types.stream import StreamEvent


def ev(kind: str, content: str = "", done: bool = False, id: str = "a1", ts: float = 0.0, **data) -> StreamEvent:
    return StreamEvent(id, kind, content, done, ts, dict(data))


def triples(events):
    return [(e.type, e.id, e.content, e.done) for e in events]


def test_consecutive_deltas_merge_and_the_done_chunk_stays_separate():
    events = [
        ev("answer", "Hel", ts=1.0, event_id="a1"),
        ev("answer", "lo ", ts=2.0, event_id="a1"),
        ev("answer", "world", ts=3.0, event_id="a1", seq=3),
        ev("answer", "", done=True, ts=4.0, event_id="a1", duration_ms=40),
    ]
    out = coalesce_events(events)
    assert triples(out) == [("answer", "a1", "Hello world", False), ("answer", "a1", "", True)]
    assert out[0].timestamp == 3.0  # the last merged event's
    assert out[0].data == {"event_id": "a1", "seq": 3}
    assert out[1] is events[3]  # a done chunk passes through unchanged, never absorbing text


def test_runs_break_on_type_id_done_and_other_events():
    events = [
        ev("thinking", "a", id="t"),
        ev("thinking", "b", id="t"),
        ev("answer", "c", id="t"),  # another type: new run
        ev("answer", "d", id="x"),  # another id: new run
        ev("references", id="x"),  # not a delta
        ev("answer", "e", id="x"),
        ev("answer", "f", id="x"),
        ev("reflection", "g", id="r"),
        ev("reflection", "h", done=True, id="r"),
        ev("reflection", "i", id="r"),
        ev("tool_call", "Calling tool: s", id="k"),
        ev("tool_call", "Calling tool: s", id="k"),
    ]
    assert triples(coalesce_events(events)) == [
        ("thinking", "t", "ab", False),
        ("answer", "t", "c", False),
        ("answer", "x", "d", False),
        ("references", "x", "", False),
        ("answer", "x", "ef", False),
        ("reflection", "r", "g", False),
        ("reflection", "r", "h", True),
        ("reflection", "r", "i", False),
        ("tool_call", "k", "Calling tool: s", False),
        ("tool_call", "k", "Calling tool: s", False),
    ]


def test_data_union_later_keys_win_on_a_private_copy():
    events = [ev("answer", "a", k=1, keep="x"), ev("answer", "b", k=2, extra=True)]
    before = copy.deepcopy(events)
    out = coalesce_events(events)
    assert out[0].data == {"k": 2, "keep": "x", "extra": True}
    assert events == before  # stored events untouched
    out[0].data["k"] = 99
    assert events[0].data["k"] == 1


def test_fewer_than_two_events_come_back_unchanged():
    assert coalesce_events([]) == []
    one = [ev("answer", "x")]
    assert coalesce_events(one) == one and coalesce_events(one)[0] is one[0]


def test_mergeable_is_delta_and_not_done():
    assert DELTA_TYPES == {"answer", "thinking", "reflection"}
    assert is_mergeable(ev("thinking", "x"))
    assert not is_mergeable(ev("thinking", "x", done=True))
    assert not is_mergeable(ev("error", "x"))
    assert not is_mergeable(ev("session_title", "x"))


_kinds = st.sampled_from(["answer", "thinking", "reflection", "references", "tool_call", "error"])
_events = st.lists(
    st.builds(
        lambda kind, content, done, id, ts, n: ev(kind, content, done, id, ts, n=n),
        _kinds,
        st.text(max_size=4),
        st.booleans(),
        st.sampled_from(["a", "b"]),
        st.floats(0, 1e9, allow_nan=False),
        st.integers(0, 3),
    ),
    max_size=30,
)


def _content_by_key(events):
    out: dict[tuple[str, str], str] = {}
    for e in events:
        out[(e.type, e.id)] = out.get((e.type, e.id), "") + e.content
    return out


@given(_events)
def test_coalescing_loses_nothing_keeps_order_and_is_maximal(events):
    before = copy.deepcopy(events)
    out = coalesce_events(events)
    assert events == before  # input not modified
    assert len(out) <= len(events)
    # every piece of text is still there, in order, per (type, id)
    assert _content_by_key(out) == _content_by_key(events)
    # events that cannot merge pass through as the same objects, in the same order
    assert [e for e in out if not is_mergeable(e)] == [e for e in events if not is_mergeable(e)]
    assert all(any(o is e for e in events) for o in out if not is_mergeable(o))
    # no two neighbours could still merge
    for a, b in zip(out, out[1:]):
        assert not (is_mergeable(a) and is_mergeable(b) and a.type == b.type and a.id == b.id)
    # coalescing twice changes nothing, and coalescing a prefix first gives the same result
    assert triples(coalesce_events(out)) == triples(out)
    if len(events) > 2:
        k = len(events) // 2
        assert triples(coalesce_events(coalesce_events(events[:k]) + events[k:])) == triples(out)
