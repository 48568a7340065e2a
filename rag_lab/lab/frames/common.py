"""What the views share: the snapshot each view reads (the one right after its stage), typed
diagnostics read back from a snapshot, short chunk ids and match-type names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar, cast

from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import RerankDiagnostics, StageDiagnostics
from rag_lab.types.search_result import MatchType

#: stages whose snapshot each view reads, first match wins
_STAGE_FOR = {
    "search": ("chunk_search_parallel", "chunk_search"),
    "fusion": ("chunk_search_parallel", "chunk_search"),
    "rerank": ("chunk_rerank",),
    "merge": ("chunk_merge",),
    "final": ("final",),
}
FRAMES = tuple(_STAGE_FOR)


class _WithSnapshots(Protocol):
    """A :class:`~rag_lab.lab.lab.Run` or a :class:`~rag_lab.lab.capture.Capture`."""

    @property
    def snapshots(self) -> Mapping[str, ChatManage]: ...


#: what a view reads: a run or a capture (the snapshot after its stage), or a ChatManage itself
Viewed = ChatManage | _WithSnapshots
_D = TypeVar("_D", bound=StageDiagnostics)


def short_id(chunk_id: str) -> str:
    """``kb_x:doc.md#c0`` → ``doc.md#c0`` (labels for plots)."""
    return chunk_id.split(":", 1)[1] if ":" in chunk_id else chunk_id


def _match_type_name(value: int | str) -> str:
    try:
        return MatchType(int(value)).name.lower()
    except (ValueError, TypeError):
        return str(value)


def _snapshot(obj: Viewed, which: str) -> ChatManage:
    """The snapshot a view reads: ``obj`` itself when it is a ChatManage."""
    if isinstance(obj, ChatManage):
        return obj
    snaps = getattr(obj, "snapshots", None)
    if snaps is None:
        raise TypeError(f"expected a Run, a Capture or a ChatManage, got {type(obj).__name__}")
    for stage in _STAGE_FOR[which]:
        if stage in snaps:
            return cast("ChatManage", snaps[stage])
    have = ", ".join(snaps) or "none (ask with snapshots=True)"
    raise KeyError(f"the '{which}' view needs a snapshot after {' or '.join(_STAGE_FOR[which])}; this run has: {have}")


def _typed(snap: ChatManage, cls: type[_D]) -> _D | None:
    """The stage's typed diagnostics (a capture or an old snapshot may still hold a plain dict)."""
    value = snap.state.diagnostics.get(cls.KEY)
    return None if value is None else cls.from_dict(value)


def _rerank_diag(snap: ChatManage) -> RerankDiagnostics:
    diag = _typed(snap, RerankDiagnostics)
    if diag is None or diag.rows is None:
        outcome = diag.outcome if diag is not None else None
        why = f" (rerank outcome: {outcome})" if outcome else " (the rerank stage did not score anything)"
        raise ValueError("no rerank score rows in this snapshot" + why)
    return diag
