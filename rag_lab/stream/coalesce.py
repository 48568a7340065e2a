"""Continue-stream replay coalescing (spec Appendix A.2, adopted by the seed).

A client that resumes a stream receives the stored log from offset 0. Replaying hundreds of
three-word answer deltas one frame each is wasteful, so consecutive deltas of the same kind and
the same event id are merged into one frame before the replay. The stored log is never changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from rag_lab.types.stream import ResponseType, StreamEvent

#: Response types whose ``content`` is an increment the client appends (delta types).
DELTA_TYPES = frozenset({ResponseType.ANSWER.value, ResponseType.THINKING.value, ResponseType.REFLECTION.value})


def is_mergeable(event: StreamEvent) -> bool:
    """A delta (answer / thinking / reflection) that is not done. A done chunk never merges."""
    return str(event.type) in DELTA_TYPES and not event.done


def _copy(event: StreamEvent) -> StreamEvent:
    return StreamEvent(event.id, event.type, event.content, event.done, event.timestamp, dict(event.data))


def coalesce_events(events: Iterable[StreamEvent]) -> list[StreamEvent]:
    """Merge each run of consecutive mergeable events with the same type and id into one event.

    The merged event has the run's contents concatenated, the last event's timestamp and the
    union of the data maps (later keys win). Everything else passes through unchanged, in
    order. The input events are not modified (merged events are private copies); fewer than two
    events come back as they are.
    """
    items = list(events)
    if len(items) < 2:
        return items
    out: list[StreamEvent] = []
    run: StreamEvent | None = None  # the current run's event (a private copy once extended)
    run_len = 0
    for ev in items:
        if run is not None and is_mergeable(ev) and ev.type == run.type and ev.id == run.id:
            if run_len == 1:
                run = _copy(run)  # first extension: stop sharing the stored event
            run.content += ev.content
            run.timestamp = ev.timestamp
            run.data.update(ev.data)
            run_len += 1
            continue
        if run is not None:
            out.append(run)
            run, run_len = None, 0
        if is_mergeable(ev):
            run, run_len = ev, 1
        else:
            out.append(ev)
    if run is not None:
        out.append(run)
    return out
