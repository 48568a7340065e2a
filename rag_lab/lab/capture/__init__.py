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

The package is split by responsibility: :mod:`.model` (format constants, :class:`Capture` and
writing it), :mod:`.convert` (ChatManage and params from their JSON view) and :mod:`.read`
(loading and checking a file, captures built in memory).
"""

from __future__ import annotations

from rag_lab.lab.capture.convert import chat_manage_from_dict, params_from_dict
from rag_lab.lab.capture.model import (
    CAPTURE_FORMAT,
    CAPTURE_VERSION,
    Capture,
    CaptureError,
    CaptureTiming,
    capture_records,
    save_capture,
)
from rag_lab.lab.capture.read import capture_from_run, capture_from_stream_manager, load_capture

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
    "capture_records",
    "params_from_dict",
]
