"""The capture and how it is written: format constants, :class:`Capture` (request, params,
snapshots, stream events, timings, extras), :class:`CaptureTiming`, :class:`CaptureError`, the
records of a run in file order (:func:`capture_records`) and :func:`save_capture` (atomic)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.types.chat_manage import (
    ChatManage,
)
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import StreamEvent

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rag_lab.lab.lab import Run

CAPTURE_FORMAT = "rag_lab.capture"
CAPTURE_VERSION = 1

_KINDS = ("header", "request", "params", "snapshot", "event", "timing", "extra", "end")


class CaptureError(ValueError):
    """A capture cannot be read (or written). ``path`` and ``line`` (1-based, 0 when the problem
    is not one line) locate it; the message names both."""

    def __init__(self, message: str, path: str | Path | None = None, line: int = 0) -> None:
        self.path = str(path) if path is not None else ""
        self.line = line
        where = self.path or "<capture>"
        if line:
            where += f":{line}"
        super().__init__(f"{where}: {message}")


@dataclass(slots=True)
class CaptureTiming:
    """A stage timing as stored (same fields as the orchestrator's ``StageTiming``)."""

    event: str
    started_at: float
    duration_ms: float
    error: str = ""
    error_type: str = ""


@dataclass
class Capture:
    """A loaded capture. It answers what the plots and widgets ask of a :class:`~rag_lab.lab.Run`:
    ``question``, ``answer``, ``references``, ``events``, ``timings``, ``snapshots``, ``params``."""

    question: str = ""
    answer: str = ""
    references: list[SearchResult] = field(default_factory=list)
    events: list[StreamEvent] = field(default_factory=list)
    timings: list[CaptureTiming] = field(default_factory=list)
    snapshots: dict[str, ChatManage] = field(default_factory=dict)
    params: PipelineParams | None = None
    stages: list[str] = field(default_factory=list)
    error: str = ""
    is_fallback: bool = False
    session_id: str = ""
    message_id: str = ""
    total_ms: float = 0.0
    #: offset of each event in the StreamManager log it came from (same length as ``events``)
    event_offsets: list[int] = field(default_factory=list)
    extras: dict[str, object] = field(default_factory=dict)
    created_at: str = ""
    rag_lab_version: str = ""
    format_version: int = CAPTURE_VERSION
    source: str = ""
    #: things the reader tolerated (e.g. params fields this version does not know)
    warnings: list[str] = field(default_factory=list)

    def state(self, event: str) -> ChatManage:
        """The ChatManage snapshot stored after ``event`` (or ``"final"``)."""
        key = str(event)
        if key not in self.snapshots:
            have = ", ".join(self.snapshots) or "none"
            raise KeyError(f"no snapshot for '{key}' in capture {self.source or '<memory>'}; it has: {have}")
        return self.snapshots[key]

    def frame(self, which: str = "search", **kwargs: object) -> pd.DataFrame:
        """See :func:`rag_lab.lab.frames.frame`."""
        from rag_lab.lab.frames import frame

        return frame(self, which, **kwargs)

    def timings_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{f.name: getattr(t, f.name) for f in fields(t)} for t in self.timings])

    @property
    def cited_chunk_ids(self) -> list[str]:
        from rag_lab.modelcontext import cited_chunk_ids

        return cited_chunk_ids(self.answer)

    def save(self, path: str | Path) -> Path:
        return save_capture(self, path)


def _json_safe(obj: object) -> object:
    """Plain JSON data; NaN/inf become None (JSON has no such numbers)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if hasattr(obj, "to_dict"):
        return _json_safe(obj.to_dict())
    return repr(obj)


def _dump(record: Mapping[str, object]) -> str:
    return json.dumps(_json_safe(record), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _timing_dict(t: object) -> dict[str, object]:
    return {
        "event": str(getattr(t, "event", "")),
        "started_at": float(getattr(t, "started_at", 0.0) or 0.0),
        "duration_ms": float(getattr(t, "duration_ms", 0.0) or 0.0),
        "error": str(getattr(t, "error", "") or ""),
        "error_type": str(getattr(t, "error_type", "") or ""),
    }


def capture_records(
    run: Run | Capture, *, fusion: object = None, stages: Iterable[str] | None = None, created_at: str | None = None
) -> list[dict[str, object]]:
    """The records :func:`save_capture` writes, in order (without the ``end`` record)."""
    from rag_lab import __version__

    params: PipelineParams | None = getattr(run, "params", None)
    params_dump = params.model_dump() if params is not None else None
    records: list[dict[str, object]] = [
        {
            "kind": "header",
            "format": CAPTURE_FORMAT,
            "version": CAPTURE_VERSION,
            "created_at": created_at or datetime.now(UTC).isoformat(timespec="milliseconds"),
            "rag_lab_version": __version__,
        },
        {
            "kind": "request",
            "question": run.question,
            "answer": run.answer,
            "session_id": getattr(run, "session_id", ""),
            "message_id": getattr(run, "message_id", ""),
            "stages": list(getattr(run, "stages", []) or []),
            "error": getattr(run, "error", "") or "",
            "is_fallback": bool(getattr(run, "is_fallback", False)),
            "total_ms": float(getattr(run, "total_ms", 0.0) or 0.0),
            "references": [r.to_dict() for r in run.references],
        },
    ]
    if params_dump is not None:
        records.append({"kind": "params", "params": params_dump})
    wanted = None if stages is None else {str(s) for s in stages}
    for stage, snap in (getattr(run, "snapshots", None) or {}).items():
        if wanted is not None and stage not in wanted:
            continue
        chat = snap.to_dict()
        if params_dump is not None and chat["request"].get("params") == params_dump:
            del chat["request"]["params"]  # stored once, in the params record
        records.append({"kind": "snapshot", "stage": stage, "chat": chat})
    offsets = list(getattr(run, "event_offsets", None) or range(len(run.events)))
    for off, ev in zip(offsets, run.events):
        rec = {"kind": "event", "offset": int(off)}
        rec.update(ev.to_dict())
        records.append(rec)
    for t in getattr(run, "timings", None) or []:
        records.append({"kind": "timing", **_timing_dict(t)})
    extras = dict(getattr(run, "extras", None) or {})
    if "mmr_inputs" not in extras:
        from rag_lab.lab.frames import mmr_inputs

        try:
            got = mmr_inputs(run)
        except (KeyError, ValueError):
            got = None
        if got is not None:
            extras["mmr_inputs"] = got
    if fusion is not None:
        extras["fusion"] = fusion
    for name, data in extras.items():
        records.append({"kind": "extra", "name": name, "data": data})
    return records


def save_capture(
    run: Run | Capture, path: str | Path, *, fusion: object = None, stages: Iterable[str] | None = None
) -> Path:
    """Write ``run`` (a :class:`~rag_lab.lab.Run` or a :class:`Capture`) as a capture file.

    ``fusion`` (from :func:`rag_lab.lab.frames.fusion_trace`) is stored for the fusion view;
    ``stages`` limits the snapshots written. The file is written to a temporary name and renamed,
    so a reader never sees half a capture.
    """
    p = Path(path)
    records = capture_records(run, fusion=fusion, stages=stages)
    records.append({"kind": "end", "records": len(records)})
    lines = []
    for i, rec in enumerate(records, 1):
        try:
            lines.append(_dump(rec))
        except (TypeError, ValueError) as exc:
            raise CaptureError(f"record {i} ({rec.get('kind')}) is not JSON-serialisable: {exc}", p) from None
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p
