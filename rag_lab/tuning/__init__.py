"""Tuning at interactive speed: post-retrieval stages replayed from captured inputs.

The event pipeline stays the reference (``ask``, step-through, the server). For sweeps and live
sliders, :func:`~rag_lab.tuning.inputs.capture_question` keeps once per question what the stages
after retrieval read, and :class:`~rag_lab.tuning.evaluator.FastEvaluator` turns a config into the
final contexts with the vectorised rerank, the stage's own merge on copies, and FILTER_TOP_K.
:mod:`.capture` runs those captures through a lab (``acapture_questions``). This package sits
below ``eval`` and ``lab``: the stage cache, the tuning widget and ``rag-lab sweep`` call it.
"""

from __future__ import annotations

from rag_lab.tuning.evaluator import FastEvaluator, Picked, compare_references, doc_ids
from rag_lab.tuning.inputs import CapturedRerank, QuestionInputs, StoreMemo, TuningUnsupported, capture_question
from rag_lab.tuning.params import ANSWER_PARAMS, MERGE_PARAMS, POST_RETRIEVAL_PARAMS, split_config

__all__ = [
    "ANSWER_PARAMS",
    "MERGE_PARAMS",
    "POST_RETRIEVAL_PARAMS",
    "CapturedRerank",
    "FastEvaluator",
    "Picked",
    "QuestionInputs",
    "StoreMemo",
    "TuningUnsupported",
    "capture_question",
    "compare_references",
    "doc_ids",
    "split_config",
]
