"""The standalone HTML replay page (:func:`export_replay_html`, ``replay.html.j2``): one
self-contained file with the final answer, the references and a small JavaScript player
(``templates/replay.js``) over the stored stream events (the same fold as
:func:`rag_lab.lab.replay.stream_state`); no network, no server, no kernel. See
:mod:`rag_lab.lab.widgets` for why it is not an ipywidgets embed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from markupsafe import Markup

from rag_lab.lab.pages.render import render_page
from rag_lab.lab.replay import display_answer

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.capture import Capture
    from rag_lab.lab.lab import Run

__all__ = ["export_replay_html", "replay_page_data"]


class ReplayPage(TypedDict):
    """The JSON an exported replay page embeds."""

    question: str
    answer: str
    references: list[dict[str, object]]
    created_at: str
    rag_lab_version: str
    events: list[dict[str, object]]


def replay_page_data(capture: Run | Capture) -> ReplayPage:
    """The JSON the exported page embeds: question, answer, references and the stream events."""
    events = []
    for ev in capture.events:
        events.append(
            {"type": str(ev.type), "content": ev.content, "done": ev.done, "t": ev.timestamp, "data": ev.data}
        )
    return {
        "question": getattr(capture, "question", ""),
        "answer": getattr(capture, "answer", ""),
        "references": [r.to_dict() for r in getattr(capture, "references", [])],
        "created_at": getattr(capture, "created_at", "") or datetime.now(UTC).isoformat(timespec="seconds"),
        "rag_lab_version": getattr(capture, "rag_lab_version", ""),
        "events": events,
    }


def _script_json(data: object) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``): the page embeds it
    as it is (already safe, so not HTML-escaped)."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def export_replay_html(capture: Run | Capture, path: str | Path, title: str | None = None) -> Path:
    """Write a standalone HTML replay of ``capture`` (a Capture or a Run) to ``path``.

    The page opens on the final state (answer with ``[n]`` citation marks, references, progress
    windows); Play replays the stream with its recorded timing, the slider scrubs, and
    ``page.html#pos=K`` opens it after K events. It needs no network and no server.
    """
    data = replay_page_data(capture)
    refs = getattr(capture, "references", [])
    page = render_page(
        "replay.html.j2",
        heading=title or "rag_lab replay",
        version=data["rag_lab_version"],
        created_at=str(data["created_at"]),
        question=data["question"],
        n_events=len(data["events"]),
        final=display_answer(data["answer"], refs, partial=False),
        references=[{"title": r.knowledge_title or r.knowledge_filename or r.id, "id": r.id} for r in refs],
        data_json=Markup(_script_json(data)),
    )
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(page, encoding="utf-8")
    return p
