"""Captures: a run saved as versioned JSONL, replayable without any model.

One JSON object per line, each with a ``kind``:

``header``    ``{format: "rag_lab.capture", version, created_at, rag_lab_version}`` (always line 1)
``request``   question, answer, ids, stages, error, fallback flag, total time
``params``    the run's :class:`~rag_lab.types.params.PipelineParams` (once; snapshots omit them)
``snapshot``  ``{stage, chat}``: the ChatManage after that stage (``ChatManage.to_dict()``)
``event``     one stored stream event, with its ``offset`` in the StreamManager log
``timing``    one :class:`~rag_lab.pipeline.orchestrator.StageTiming`
``extra``     ``{name, data}``: data the views need that a snapshot does not hold
              (``mmr_inputs``: ranked ids, scores and MMR token sets; ``fusion``: hybrid-search
              traces with per-list ranks)
``end``       ``{records}``: the number of lines before it, so a truncated file is detected

A reader refuses a newer ``version``, a corrupt line or a missing ``end`` with a
:class:`CaptureError` naming the file and the line. Why JSONL: a capture is appended to while a
stream runs, greps well, and one bad line is located exactly.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_lab.types.chat_manage import (
    ChatManage,
    History,
    PipelineContext,
    PipelineRequest,
    PipelineState,
    SearchTarget,
    SummaryConfig,
)
from rag_lab.types.diagnostics import diagnostics_from_dict
from rag_lab.types.params import ParamsError, PipelineParams
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import StreamEvent

__all__ = [
    "CAPTURE_FORMAT",
    "CAPTURE_VERSION",
    "Capture",
    "CaptureError",
    "CaptureTiming",
    "capture_from_run",
    "capture_from_stream_manager",
    "chat_manage_from_dict",
    "load_capture",
    "save_capture",
]

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
    extras: dict[str, Any] = field(default_factory=dict)
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

    def frame(self, which: str = "search", **kwargs: Any):
        """See :func:`rag_lab.lab.frames.frame`."""
        from rag_lab.lab.frames import frame

        return frame(self, which, **kwargs)

    def timings_frame(self):
        import pandas as pd

        return pd.DataFrame([{f.name: getattr(t, f.name) for f in fields(t)} for t in self.timings])

    @property
    def cited_chunk_ids(self) -> list[str]:
        from rag_lab.modelcontext import cited_chunk_ids

        return cited_chunk_ids(self.answer)

    def save(self, path: str | Path) -> Path:
        return save_capture(self, path)


# -- ChatManage from its JSON view ------------------------------------------------------------
def _known(cls: type, data: Any, where: str, warnings: list[str] | None) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"{where}: expected an object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown and warnings is not None:
        warnings.append(f"{where}: ignored unknown field(s) {', '.join(unknown)}")
    return {k: v for k, v in data.items() if k in names}


def params_from_dict(data: Any, where: str = "params", warnings: list[str] | None = None) -> PipelineParams:
    """PipelineParams from a dump; fields this version does not know are dropped (and noted)."""
    if not isinstance(data, dict):
        raise TypeError(f"{where}: expected an object, got {type(data).__name__}")
    known = set(PipelineParams.model_fields)
    unknown = sorted(set(data) - known)
    if unknown and warnings is not None:
        warnings.append(f"{where}: ignored unknown params field(s) {', '.join(unknown)}")
    return PipelineParams.from_mapping({k: v for k, v in data.items() if k in known}, source=where)


def _results(data: Any, where: str) -> list[SearchResult]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise TypeError(f"{where}: expected a list, got {type(data).__name__}")
    return [SearchResult.from_dict(x) for x in data]


def chat_manage_from_dict(
    data: dict[str, Any], params: PipelineParams | None = None, warnings: list[str] | None = None
) -> ChatManage:
    """Rebuild a ChatManage from :meth:`ChatManage.to_dict` output.

    ``params`` is used when the dict carries none (captures store them once). Values the JSON view
    turned into ``repr`` strings (chat response, graph result, attachments) stay strings.
    """
    if not isinstance(data, dict):
        raise TypeError(f"snapshot: expected an object, got {type(data).__name__}")
    req_d = dict(data.get("request") or {})
    raw_params = req_d.pop("params", None)
    if raw_params is not None:
        p = params_from_dict(raw_params, "request.params", warnings)
    else:
        p = params if params is not None else PipelineParams()
    summary = SummaryConfig(
        **_known(SummaryConfig, req_d.pop("summary_config", None) or {}, "request.summary_config", warnings)
    )
    targets = [
        SearchTarget(**_known(SearchTarget, t, f"request.search_targets[{i}]", warnings))
        for i, t in enumerate(req_d.pop("search_targets", None) or [])
    ]
    req = PipelineRequest(
        **_known(PipelineRequest, req_d, "request", warnings), summary_config=summary, search_targets=targets, params=p
    )
    st_d = dict(data.get("state") or {})
    history = []
    for i, h in enumerate(st_d.pop("history", None) or []):
        hd = _known(History, h, f"state.history[{i}]", warnings)
        hd["knowledge_references"] = _results(
            hd.get("knowledge_references"), f"state.history[{i}].knowledge_references"
        )
        history.append(History(**hd))
    lists: dict[str, Any] = {
        name: _results(st_d.pop(name, None), f"state.{name}")
        for name in ("search_result", "rerank_result", "merge_result")
    }
    diagnostics = diagnostics_from_dict(st_d.pop("diagnostics", None) or {})
    state = PipelineState(
        **_known(PipelineState, st_d, "state", warnings), history=history, diagnostics=diagnostics, **lists
    )
    ctx_d = data.get("context") or {}
    ctx = PipelineContext(
        message_id=str(ctx_d.get("message_id", "")), user_message_id=str(ctx_d.get("user_message_id", ""))
    )
    return ChatManage(request=req, state=state, context=ctx)


# -- writing ----------------------------------------------------------------------------------
def _json_safe(obj: Any) -> Any:
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


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(_json_safe(record), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _timing_dict(t: Any) -> dict[str, Any]:
    return {
        "event": str(getattr(t, "event", "")),
        "started_at": float(getattr(t, "started_at", 0.0) or 0.0),
        "duration_ms": float(getattr(t, "duration_ms", 0.0) or 0.0),
        "error": str(getattr(t, "error", "") or ""),
        "error_type": str(getattr(t, "error_type", "") or ""),
    }


def capture_records(
    run: Any, *, fusion: Any = None, stages: Iterable[str] | None = None, created_at: str | None = None
) -> list[dict[str, Any]]:
    """The records :func:`save_capture` writes, in order (without the ``end`` record)."""
    from rag_lab import __version__

    params: PipelineParams | None = getattr(run, "params", None)
    params_dump = params.model_dump() if params is not None else None
    records: list[dict[str, Any]] = [
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


def save_capture(run: Any, path: str | Path, *, fusion: Any = None, stages: Iterable[str] | None = None) -> Path:
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


def capture_from_run(run: Any, *, fusion: Any = None) -> Capture:
    """A :class:`Capture` of ``run`` in memory (what saving then loading gives)."""
    records = capture_records(run, fusion=fusion)
    records.append({"kind": "end", "records": len(records)})
    plain = json.loads(json.dumps(_json_safe(records)))
    return _build(list(enumerate(plain, 1)), "<memory>")


def capture_from_stream_manager(
    manager: Any, session_id: str, message_id: str, *, question: str = "", from_offset: int = 0
) -> Capture:
    """Capture what a StreamManager (memory, Redis, anything with ``get_events``) holds for one
    message: every event from ``from_offset`` with its offset, the answer assembled from the answer
    deltas and the last references event. No snapshots or timings: a stream does not carry them."""
    events, _next = manager.get_events(session_id, message_id, from_offset)
    if not events:
        raise CaptureError(
            f"no stream events for session '{session_id}' message '{message_id}' from offset {from_offset}",
            f"<{type(manager).__name__}>",
        )
    answer = "".join(e.content for e in events if e.type == "answer")
    refs: list[SearchResult] = []
    error = ""
    for e in events:
        if e.type == "references":
            refs = [SearchResult.from_dict(r) for r in (e.data.get("references") or [])]
        elif e.type == "error" and not error:
            error = e.content
    cap = Capture(
        question=question,
        answer=answer,
        references=refs,
        events=list(events),
        session_id=session_id,
        message_id=message_id,
        error=error,
        is_fallback=any(e.type == "answer" and e.data.get("is_fallback") for e in events),
        event_offsets=list(range(from_offset, from_offset + len(events))),
        created_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
        source=f"<{type(manager).__name__} {session_id}/{message_id}>",
    )
    from rag_lab import __version__

    cap.rag_lab_version = __version__
    return cap


# -- reading ----------------------------------------------------------------------------------
def _require(rec: dict[str, Any], key: str, types: type | tuple[type, ...], path: str, line: int) -> Any:
    if key not in rec:
        raise CaptureError(f"{rec.get('kind')} record: missing field '{key}'", path, line)
    value = rec[key]
    if isinstance(value, bool) and types in (int, float, (int, float)):
        raise CaptureError(f"{rec.get('kind')} record: field '{key}' = {value!r} is not a number", path, line)
    if not isinstance(value, types):
        want = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise CaptureError(f"{rec.get('kind')} record: field '{key}' = {value!r} is not {want}", path, line)
    return value


def _check_header(rec: dict[str, Any], path: str) -> int:
    if rec.get("kind") != "header" or rec.get("format") != CAPTURE_FORMAT:
        raise CaptureError(
            f"not a rag_lab capture: line 1 must be a header with format '{CAPTURE_FORMAT}', got "
            f"kind={rec.get('kind')!r} format={rec.get('format')!r}",
            path,
            1,
        )
    version = _require(rec, "version", int, path, 1)
    if version > CAPTURE_VERSION:
        raise CaptureError(
            f"capture format version {version} is newer than this rag_lab reads (version {CAPTURE_VERSION}, "
            f"written by rag_lab {rec.get('rag_lab_version', '?')}); upgrade rag_lab to read it",
            path,
            1,
        )
    if version < 1:
        raise CaptureError(f"invalid capture format version {version!r}", path, 1)
    return version


def _parse_lines(text: str, path: str) -> list[tuple[int, dict[str, Any]]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if not lines:
        raise CaptureError("empty file: not a rag_lab capture", path)
    out: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            raise CaptureError("empty line (a capture has one JSON object per line)", path, n)
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            if n == 1:
                raise CaptureError(f"not a rag_lab capture: line 1 is not JSON ({exc.msg})", path, 1) from None
            raise CaptureError(f"corrupt line: invalid JSON ({exc.msg} at column {exc.colno})", path, n) from None
        if not isinstance(rec, dict):
            raise CaptureError(f"corrupt line: expected a JSON object, got {type(rec).__name__}", path, n)
        if n == 1:
            _check_header(rec, path)
        elif rec.get("kind") not in _KINDS:
            raise CaptureError(f"unknown record kind {rec.get('kind')!r}; expected one of {', '.join(_KINDS)}", path, n)
        out.append((n, rec))
    return out


def _build(numbered: list[tuple[int, dict[str, Any]]], path: str) -> Capture:
    """A Capture from (line number, record) pairs whose first record is a checked header."""
    cap = Capture(source=path)
    header = numbered[0][1]
    cap.format_version = int(header["version"])
    cap.created_at = str(header.get("created_at", ""))
    cap.rag_lab_version = str(header.get("rag_lab_version", ""))
    seen_end = False
    raw_snapshots: list[tuple[int, str, dict[str, Any]]] = []
    last = numbered[-1][0]
    for n, rec in numbered[1:]:
        kind = rec.get("kind")
        if seen_end:
            raise CaptureError(f"record after the end record (kind {kind!r})", path, n)
        try:
            if kind == "header":
                raise CaptureError("a second header record", path, n)
            if kind == "request":
                cap.question = _require(rec, "question", str, path, n)
                cap.answer = _require(rec, "answer", str, path, n)
                cap.session_id = str(rec.get("session_id", ""))
                cap.message_id = str(rec.get("message_id", ""))
                cap.stages = [str(s) for s in rec.get("stages") or []]
                cap.error = str(rec.get("error", ""))
                cap.is_fallback = bool(rec.get("is_fallback", False))
                cap.total_ms = float(rec.get("total_ms") or 0.0)
                cap.references = _results(rec.get("references"), "references")
            elif kind == "params":
                cap.params = params_from_dict(_require(rec, "params", dict, path, n), "params", cap.warnings)
            elif kind == "snapshot":
                raw_snapshots.append((n, _require(rec, "stage", str, path, n), _require(rec, "chat", dict, path, n)))
            elif kind == "event":
                off = _require(rec, "offset", int, path, n)
                if cap.event_offsets and off <= cap.event_offsets[-1]:
                    raise CaptureError(
                        f"event offset {off} is not after the previous one ({cap.event_offsets[-1]})", path, n
                    )
                _require(rec, "type", str, path, n)
                _require(rec, "timestamp", (int, float), path, n)
                cap.events.append(StreamEvent.from_dict(rec))
                cap.event_offsets.append(off)
            elif kind == "timing":
                cap.timings.append(
                    CaptureTiming(
                        event=_require(rec, "event", str, path, n),
                        started_at=float(_require(rec, "started_at", (int, float), path, n)),
                        duration_ms=float(_require(rec, "duration_ms", (int, float), path, n)),
                        error=str(rec.get("error", "")),
                        error_type=str(rec.get("error_type", "")),
                    )
                )
            elif kind == "extra":
                cap.extras[_require(rec, "name", str, path, n)] = rec.get("data")
            elif kind == "end":
                count = _require(rec, "records", int, path, n)
                if count != n - 1:
                    raise CaptureError(f"end record counts {count} records but {n - 1} precede it", path, n)
                seen_end = True
        except CaptureError:
            raise
        except (TypeError, ValueError, ParamsError) as exc:
            raise CaptureError(f"invalid {kind} record: {exc}", path, n) from None
    if not seen_end:
        raise CaptureError(f"truncated capture: no end record after line {last}", path, last)
    for n, stage, chat in raw_snapshots:
        try:
            cap.snapshots[stage] = chat_manage_from_dict(chat, cap.params, cap.warnings)
        except (TypeError, ValueError, ParamsError) as exc:
            raise CaptureError(f"invalid snapshot record for stage '{stage}': {exc}", path, n) from None
    return cap


def load_capture(path: str | Path) -> Capture:
    """Read a capture file. Raises :class:`CaptureError` (naming the file and line) for a newer
    format version, a corrupt or unknown line, or a truncated file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CaptureError("no such capture file", p) from None
    except UnicodeDecodeError as exc:
        raise CaptureError(f"not UTF-8 text (byte {exc.start}): not a rag_lab capture", p) from None
    return _build(_parse_lines(text, str(p)), str(p))
