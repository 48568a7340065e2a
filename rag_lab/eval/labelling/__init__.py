"""Labelling a question set by hand: accept / edit / reject generated questions and grade the
passages retrieved for them (graded qrels), written back to the dataset folder.

:mod:`.model` holds one question's review state and its on-disk form, :mod:`.session` the whole
folder (commands, atomic saves), :mod:`.panel` the ipywidgets view (``LabelPanel``)."""

from __future__ import annotations

from typing import Any

from rag_lab.eval.labelling.model import GRADE_NAMES, GRADES, PassageLabel, QuestionState
from rag_lab.eval.labelling.session import Command, LabelSession, PassageRef, parse_commands

__all__ = [
    "GRADES",
    "GRADE_NAMES",
    "Command",
    "LabelPanel",
    "LabelSession",
    "Passage",
    "PassageLabel",
    "PassageRef",
    "QuestionState",
    "lab_retriever",
    "parse_commands",
]


def __getattr__(name: str) -> Any:  # the panel needs ipywidgets: imported when asked for
    if name in ("LabelPanel", "Passage", "lab_retriever"):
        from rag_lab.eval.labelling import panel

        return getattr(panel, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
