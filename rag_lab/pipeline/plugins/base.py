"""Small base class for stages: declares the events and keeps the services."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rag_lab.types.events import EventType

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import Services


class StagePlugin:
    events: ClassVar[tuple[EventType, ...]] = ()

    def __init__(self, services: Services) -> None:
        self.services = services

    def activation_events(self) -> list[EventType]:
        return list(self.events)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(str(e) for e in self.events)})"
