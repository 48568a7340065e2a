"""Reading captures: the header's format and version checked, every line parsed and checked with
errors naming the file, the line and the field, a missing ``end`` detected, then the
:class:`~rag_lab.lab.capture.model.Capture` built; also a capture built in memory from a run or
from what a StreamManager holds for one message."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from rag_lab.lab.capture.convert import _results, chat_manage_from_dict, params_from_dict
from rag_lab.lab.capture.model import (
    _KINDS,
    CAPTURE_FORMAT,
    CAPTURE_VERSION,
    Capture,
    CaptureError,
    CaptureTiming,
    _json_safe,
    capture_records,
)
from rag_lab.types.params import ParamsError
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import StreamEvent

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Run
    from rag_lab.stream.manager import StreamManager


def capture_from_run(run: Run | Capture, *, fusion: object = None) -> Capture:
    """A :class:`Capture` of ``run`` in memory (what saving then loading gives)."""
    records = capture_records(run, fusion=fusion)
    records.append({"kind": "end", "records": len(records)})
    plain = json.loads(json.dumps(_json_safe(records)))
    return _build(list(enumerate(plain, 1)), "<memory>")


def capture_from_stream_manager(
    manager: StreamManager, session_id: str, message_id: str, *, question: str = "", from_offset: int = 0
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


_T = TypeVar("_T")


@overload
def _require(rec: dict[str, object], key: str, types: type[_T], path: str, line: int) -> _T: ...


@overload
def _require(rec: dict[str, object], key: str, types: tuple[type[int], type[float]], path: str, line: int) -> float: ...


def _require(rec: dict[str, object], key: str, types: type | tuple[type, ...], path: str, line: int) -> object:
    if key not in rec:
        raise CaptureError(f"{rec.get('kind')} record: missing field '{key}'", path, line)
    value = rec[key]
    if isinstance(value, bool) and types in (int, float, (int, float)):
        raise CaptureError(f"{rec.get('kind')} record: field '{key}' = {value!r} is not a number", path, line)
    if not isinstance(value, types):
        want = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise CaptureError(f"{rec.get('kind')} record: field '{key}' = {value!r} is not {want}", path, line)
    return value


def _check_header(rec: dict[str, object], path: str) -> int:
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
    return int(version)


def _parse_lines(text: str, path: str) -> list[tuple[int, dict[str, object]]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    if not lines:
        raise CaptureError("empty file: not a rag_lab capture", path)
    out: list[tuple[int, dict[str, object]]] = []
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
    raw_snapshots: list[tuple[int, str, dict[str, object]]] = []
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
