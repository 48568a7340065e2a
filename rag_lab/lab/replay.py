"""Replay a captured stream: the state of the stream after any number of events, and the
terminal replay behind ``rag-lab replay CAPTURE``.

:func:`stream_state` folds stored stream events into what a client shows at that point:
progress windows (the ``query_understand`` / ``knowledge_search`` pseudo-tools, with their
results), the references, the thinking text, the answer so far, errors and completion. The
terminal replay, the notebook player and the exported HTML player all show this same state (the
HTML player re-implements the fold in JavaScript; a browser test checks the two agree).
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from rag_lab.cliutil import command, number_arg, opt
from rag_lab.types.stream import StreamEvent

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.capture import Capture
    from rag_lab.lab.lab import Run

__all__ = [
    "ProgressWindow",
    "StreamState",
    "cmd_replay",
    "display_answer",
    "event_delays",
    "replay_to_terminal",
    "stream_state",
]

_KB_TAG = re.compile(r"<kb(?![0-9A-Za-z_])[^>]*>", re.IGNORECASE | re.DOTALL)
_PARTIAL_TAG = re.compile(r"<(?:k(?:b(?![0-9A-Za-z_])[^>]*)?)?$", re.IGNORECASE | re.DOTALL)
_CHUNK_ATTR = re.compile(r'(?<![0-9A-Za-z_])chunk_id[\t\n\f\r ]*=[\t\n\f\r ]*"([^"]+)"', re.IGNORECASE)
_ENTITIES = (("&quot;", '"'), ("&#34;", '"'), ("&#39;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def _unescape(s: str) -> str:
    for a, b in _ENTITIES:
        s = s.replace(a, b)
    return s


def display_answer(answer: str, references: Sequence[object] = (), partial: bool = True) -> str:
    """The answer as a reader sees it: each ``<kb … chunk_id="X" />`` citation becomes ``[n]``,
    ``n`` being X's 1-based place in ``references`` (``[?]`` when X is not among them). With
    ``partial``, a tag still being streamed at the end (``<kb doc="…``) is hidden."""
    ids = [r.get("id", "") if isinstance(r, dict) else getattr(r, "id", "") for r in references]

    def mark(m: re.Match[str]) -> str:
        cm = _CHUNK_ATTR.search(m.group(0))
        cid = _unescape(cm.group(1)) if cm else ""
        return f"[{ids.index(cid) + 1}]" if cid in ids else "[?]"

    text = _KB_TAG.sub(mark, answer or "")
    if partial:
        text = _PARTIAL_TAG.sub("", text)
    return text


@dataclass
class ProgressWindow:
    """One progress window: a pseudo-tool call and (once closed) its result."""

    call_id: str
    tool: str
    arguments: object = None
    status: str = "running"  # running | done | failed
    duration_ms: int | None = None
    output: str = ""
    error: str = ""
    details: dict[str, object] = field(default_factory=dict)


@dataclass
class StreamState:
    """What a client shows after ``position`` events."""

    position: int = 0
    total: int = 0
    windows: list[ProgressWindow] = field(default_factory=list)
    references: list[dict[str, Any]] = field(default_factory=list)
    thinking: str = ""
    answer: str = ""
    errors: list[str] = field(default_factory=list)
    complete: bool = False
    answer_done: bool = False
    is_fallback: bool = False
    title: str = ""
    elapsed_s: float = 0.0
    last_type: str = ""

    @property
    def display_answer(self) -> str:
        return display_answer(self.answer, self.references, partial=not self.answer_done)


_WINDOW_DETAIL_SKIP = {"tool_name", "success", "error", "duration_ms", "tool_call_id", "output"}


def stream_state(events: Sequence[StreamEvent], position: int | None = None) -> StreamState:
    """Fold the first ``position`` events (default: all) into a :class:`StreamState`."""
    n = len(events) if position is None else max(0, min(int(position), len(events)))
    st = StreamState(position=n, total=len(events))
    by_call: dict[str, ProgressWindow] = {}
    t0 = events[0].timestamp if events else 0.0
    for ev in events[:n]:
        d = ev.data or {}
        t = str(ev.type)
        st.last_type = t
        st.elapsed_s = max(0.0, ev.timestamp - t0)
        if t == "tool_call":
            w = ProgressWindow(str(d.get("tool_call_id", "")), str(d.get("tool_name", "")), d.get("arguments"))
            st.windows.append(w)
            by_call[w.call_id] = w
        elif t in ("tool_result", "error") and d.get("tool_call_id") in by_call:
            w = by_call[d["tool_call_id"]]
            w.status = "done" if t == "tool_result" and d.get("success", True) else "failed"
            w.duration_ms = int(d["duration_ms"]) if isinstance(d.get("duration_ms"), (int, float)) else None
            w.output = str(d.get("output") or ev.content or "")
            w.error = str(d.get("error") or (ev.content if t == "error" else "") or "")
            w.details = {k: v for k, v in d.items() if k not in _WINDOW_DETAIL_SKIP}
            if t == "error":
                st.errors.append(w.error)
        elif t == "error":
            st.errors.append(ev.content or str(d.get("error", "")))
        elif t == "references":
            st.references = list(d.get("references") or [])
        elif t == "thinking":
            st.thinking += ev.content
        elif t == "answer":
            st.answer += ev.content
            if d.get("is_fallback"):
                st.is_fallback = True
            if ev.done:
                st.answer_done = True
        elif t == "complete":
            st.complete = True
        elif t == "session_title":
            st.title = ev.content
    return st


def event_delays(events: Sequence[StreamEvent], speed: float = 1.0, max_delay: float = 5.0) -> list[float]:
    """Seconds to wait before each event to replay at ``speed`` (0: no waiting); a gap longer
    than ``max_delay`` seconds (after scaling) is cut to it."""
    if speed < 0:
        raise ValueError(f"speed must be >= 0, got {speed!r}")
    if speed == 0 or not events:
        return [0.0] * len(events)
    out = [0.0]
    for prev, cur in zip(events, events[1:]):
        gap = max(0.0, cur.timestamp - prev.timestamp) / speed
        out.append(min(gap, max_delay))
    return out


def _window_line(w: ProgressWindow) -> str:
    label = w.tool.replace("_", " ")
    if w.status == "running":
        return f"… {label}"
    took = f" ({w.duration_ms} ms)" if w.duration_ms is not None else ""
    if w.status == "failed":
        return f"✗ {label}{took}: {w.error}"
    bits = []
    for key in ("rewrite_query", "intent", "count", "doc_count"):
        if key in w.details and w.details[key] not in ("", None):
            bits.append(f"{key}={w.details[key]}")
    if w.output:
        bits.append(w.output)
    return f"✓ {label}{took}" + (": " + ", ".join(str(b) for b in bits) if bits else "")


def replay_to_terminal(
    capture: Run | Capture,
    speed: float = 1.0,
    out: TextIO | None = None,
    max_delay: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> StreamState:
    """Print a capture's stream as it arrived: progress windows as they open and close, the
    references when they arrive, the thinking text and the answer in separate blocks, errors and
    completion. ``speed`` scales the recorded gaps (2.0 = twice as fast, 0 = no waiting).
    Returns the final :class:`StreamState`."""
    out = out or sys.stdout
    events = list(capture.events)
    delays = event_delays(events, speed, max_delay)
    if getattr(capture, "question", ""):
        out.write(f"Q: {capture.question}\n")
    block = ""  # "thinking" | "answer" | ""
    shown = ""  # the part of the displayed answer already printed
    last = stream_state([])
    for i, ev in enumerate(events):
        if delays[i] > 0:
            sleep(delays[i])
        prev = last
        last = stream_state(events, i + 1)
        t = str(ev.type)
        if t in ("thinking", "answer") and block != t:
            out.write(("\n" if block else "") + ("[thinking]\n" if t == "thinking" else "Answer:\n"))
            block = t
        elif t not in ("thinking", "answer") and block:
            out.write("\n")
            block = ""
        if t == "tool_call":
            out.write(_window_line(last.windows[-1]) + "\n")
        elif t in ("tool_result", "error"):
            changed = [w for w, p in zip(last.windows, prev.windows) if w.status != p.status]
            if changed:
                out.write(_window_line(changed[0]) + "\n")
            else:
                out.write(f"✗ error: {ev.content or ev.data.get('error', '')}\n")
        elif t == "references":
            out.write(f"References ({len(last.references)}):\n")
            for n, r in enumerate(last.references, 1):
                title = r.get("knowledge_title") or r.get("knowledge_filename") or ""
                out.write(f"  [{n}] {float(r.get('score') or 0):.3f} {title} ({r.get('id', '')})\n")
        elif t == "thinking":
            out.write(ev.content)
        elif t == "answer":
            now = last.display_answer
            if now.startswith(shown):
                out.write(now[len(shown) :])
            else:  # cannot happen with well-formed tags; print the raw delta rather than lose it
                out.write(ev.content)
            shown = now
        elif t == "complete":
            total = ev.data.get("total_duration_ms")
            out.write("— complete" + (f" in {total} ms" if total is not None else "") + "\n")
        elif t == "session_title":
            out.write(f"title: {ev.content}\n")
        out.flush()
    if block:
        out.write("\n")
    return last


# -- CLI --------------------------------------------------------------------------------------
_speed = number_arg(float, lambda v: v >= 0, ">= 0 (0 replays without delays)")


@command(
    "replay",
    "print a captured stream as it arrived",
    opt("capture", "a capture file (.jsonl) written by save_capture"),
    opt("--speed", "replay speed factor (default 1; 0 = no delays)", type=_speed, default=1.0),
    opt("--max-delay", "longest pause between two events, seconds", type=float, default=5.0),
)
def cmd_replay(args: argparse.Namespace) -> int:
    """``rag-lab replay CAPTURE [--speed S] [--max-delay SECONDS]``: a bad capture raises
    CaptureError (a ValueError), which the CLI prints as ``rag-lab replay: FILE:LINE: …`` with exit
    status 2."""
    from rag_lab.lab.capture import load_capture

    cap = load_capture(args.capture)
    replay_to_terminal(cap, speed=args.speed, max_delay=args.max_delay)
    return 0


def state_html(st: StreamState) -> dict[str, str]:
    """HTML for each pane of the player: ``progress``, ``references``, ``thinking``, ``answer``,
    ``status``."""
    esc = html.escape
    prog = []
    for w in st.windows:
        color = {"running": "#9a6700", "done": "#1a7f37", "failed": "#cf222e"}[w.status]
        prog.append(f"<li style='color:{color}'>{esc(_window_line(w))}</li>")
    for e in st.errors:
        if not any(w.error == e for w in st.windows):
            prog.append(f"<li style='color:#cf222e'>✗ {esc(e)}</li>")
    refs = []
    for n, r in enumerate(st.references, 1):
        title = r.get("knowledge_title") or r.get("knowledge_filename") or r.get("id", "")
        body = str(r.get("content", ""))
        refs.append(
            f"<li><b>[{n}] {esc(str(title))}</b> <small>{esc(str(r.get('id', '')))} · "
            f"score {float(r.get('score') or 0):.3f}</small><br><span style='color:#57606a'>"
            f"{esc(body[:300])}{'…' if len(body) > 300 else ''}</span></li>"
        )
    status = f"event {st.position}/{st.total} · +{st.elapsed_s * 1000:.0f} ms"
    if st.complete:
        status += " · complete"
    return {
        "progress": "<ul style='margin:0'>" + "".join(prog) + "</ul>" if prog else "<i>no progress yet</i>",
        "references": "<ol style='margin:0;list-style:none;padding-left:0'>" + "".join(refs) + "</ol>"
        if refs
        else "<i>no references yet</i>",
        "thinking": f"<pre style='white-space:pre-wrap;color:#57606a;margin:0'>{esc(st.thinking)}</pre>"
        if st.thinking
        else "<i>no thinking</i>",
        "answer": f"<div style='white-space:pre-wrap'>{esc(st.display_answer)}</div>",
        "status": esc(status),
    }
