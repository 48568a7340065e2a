"""The keyword options :class:`~rag_lab.lab.lab.Lab` passes on: ``ask`` / ``step`` to
:meth:`Lab.aask <rag_lab.lab.lab.Lab.aask>`, ``save`` to
:func:`~rag_lab.lab.capture.save_capture`, ``kb`` to the workspace's ``create_kb``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    from rag_lab.lab.lab import StagePause
    from rag_lab.stream.bus import BusEvent
    from rag_lab.types.params import PipelineParams

__all__ = ["AskOptions", "KbOptions", "SaveOptions", "StepOptions"]


class StepOptions(TypedDict, total=False):
    """The options of ``Lab.aask`` a step-through takes (it pauses the run itself)."""

    params: PipelineParams | Mapping[str, object] | None
    session_id: str
    on_event: Callable[[BusEvent], None] | None
    snapshots: bool
    message_id: str
    cancel_event: asyncio.Event | None
    user_id: str
    tenant_id: int
    persist: bool
    retrieval_only: bool


class AskOptions(StepOptions, total=False):
    """Every keyword option of ``Lab.aask``."""

    pause: StagePause | None


class SaveOptions(TypedDict, total=False):
    """The keyword options of :func:`~rag_lab.lab.capture.save_capture`."""

    fusion: object
    stages: Iterable[str] | None


class KbOptions(TypedDict, total=False):
    """The settings of a KB ``Lab.kb`` creates (those of the workspace's ``create_kb``)."""

    chunk_size: int
    chunk_overlap: int
    parent_chunk_size: int
    kb_type: str
    description: str
    keyword_enabled: bool
    bm25: dict[str, object] | None
    graph_enabled: bool
    tenant_id: int
