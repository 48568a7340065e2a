"""Labelling a question set by hand: accept / edit / reject generated questions and grade the
passages retrieved for them (graded qrels), written back to the dataset folder.

:mod:`.model` holds one question's review state and its on-disk form, :mod:`.session` the whole
folder (commands, atomic saves). The ipywidgets view (``LabelPanel``) draws, so it lives in the
drawing layer: :mod:`rag_lab.lab.label_panel`."""

from __future__ import annotations

from rag_lab.eval.labelling.model import GRADE_NAMES, GRADES, PassageLabel, QuestionState
from rag_lab.eval.labelling.session import Command, LabelSession, PassageRef, parse_commands

__all__ = [
    "GRADES",
    "GRADE_NAMES",
    "Command",
    "LabelSession",
    "PassageLabel",
    "PassageRef",
    "QuestionState",
    "parse_commands",
]
