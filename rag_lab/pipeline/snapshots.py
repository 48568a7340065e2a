"""Copy-on-write snapshots of the ChatManage after each event, planned from the stage contracts.

The lab keeps a snapshot after every event (step-through, diffs, re-runs, captures). A full deep
copy per event cost more than most stages' own work. A :class:`SnapshotPlan` reads, once per event
manager, which ChatManage fields each event's plugins declare they write
(:class:`~rag_lab.pipeline.contracts.StageContract`, kept honest by the contract test); a
:class:`SnapshotTaker` (one per run) then takes each snapshot with
:meth:`~rag_lab.types.chat_manage.ChatManage.snapshot_after`:

* the first snapshot of a run, and the one after an event with a plugin that declares no contract,
  is a full copy;
* a field the event writes and no other event writes is the live object itself: nothing changes
  it after its event (the rerank diagnostics, say, are built once and only read afterwards);
* a field another event also writes, or that a stage left running in the background (the answer
  stream) may still change, is copied: at the event that wrote it and, for background writers,
  at every later snapshot;
* every other field is shared with the previous snapshot.

The snapshot after the run copies what may have changed since the last event's snapshot: the
fields of background stages and what a fallback answer writes; the rest is the last snapshot's.

Each snapshot reads like a full copy (``to_dict()`` equal, tested on whole runs); snapshots share
unchanged objects with each other, so take ``snap.snapshot()`` before editing one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.fallback import FALLBACK_WRITES
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.plugin import EventManager

__all__ = ["SnapshotPlan", "SnapshotTaker"]

#: a plugin that writes this runs work after its event returns (the answer stream)
_BACKGROUND = "context.background_tasks"
#: the whole diagnostics dict (no key): never shared with the live chat, other stages add keys to it
_WHOLE_DIAGNOSTICS = "state.diagnostics"


class SnapshotPlan:
    """What each event writes, from the contracts of the plugins registered for it."""

    def __init__(self, writes: dict[EventType, frozenset[str] | None]) -> None:
        #: event -> the paths its plugins write (None: a plugin without a contract, copy everything)
        self.writes = writes
        writers: dict[str, set[EventType]] = defaultdict(set)
        for event, paths in writes.items():
            for path in paths or ():
                writers[path].add(event)
        #: events whose plugins leave work running that may still write their fields
        self.background = frozenset(e for e, paths in writes.items() if paths is not None and _BACKGROUND in paths)
        self.share: dict[EventType, frozenset[str]] = {}
        self.copy: dict[EventType, frozenset[str]] = {}
        for event, paths in writes.items():
            if paths is None:
                continue
            own = frozenset(
                p for p in paths if event not in self.background and writers[p] == {event} and p != _WHOLE_DIAGNOSTICS
            )
            self.share[event] = own
            self.copy[event] = paths - own
        #: every plugin declares a contract (else the snapshot after the run is a full copy too)
        self.contracted = all(paths is not None for paths in writes.values())

    @classmethod
    def from_manager(cls, manager: EventManager) -> SnapshotPlan:
        writes: dict[EventType, frozenset[str] | None] = {}
        for event in EventType:
            plugins = manager.plugins_for(event)
            if not plugins:
                continue
            contracts = [getattr(plugin, "contract", None) for plugin in plugins]
            if all(isinstance(c, StageContract) for c in contracts):
                writes[event] = frozenset(p for c in contracts for p in c.writes)  # type: ignore[union-attr]
            else:
                writes[event] = None
        return cls(writes)


class SnapshotTaker:
    """Takes one run's snapshots in event order (see the module docstring)."""

    def __init__(self, plan: SnapshotPlan | None) -> None:
        self.plan = plan
        self.previous: ChatManage | None = None
        self._dirty: set[str] = set()  # written by a background stage: copied at every snapshot

    def take(self, event: EventType, chat: ChatManage) -> ChatManage:
        plan = self.plan
        writes = plan.writes.get(event) if plan is not None else None
        if plan is None or self.previous is None or writes is None:
            snap = chat.snapshot()
        else:
            snap = chat.snapshot_after(self.previous, plan.copy[event] | self._dirty, plan.share[event])
        if plan is not None and event in plan.background and writes is not None:
            self._dirty |= writes
        self.previous = snap
        return snap

    def final(self, chat: ChatManage) -> ChatManage:
        """The snapshot after the run (background work and any fallback answer done).

        Every event that ran was snapshotted right after it, copying what it wrote; since the
        last one, only background stages (their fields are in ``_dirty``) and a fallback answer
        may have written: those are copied, everything else is the last snapshot's."""
        plan = self.plan
        if plan is None or self.previous is None or not plan.contracted:
            return chat.snapshot()
        return chat.snapshot_after(self.previous, self._dirty | FALLBACK_WRITES)
