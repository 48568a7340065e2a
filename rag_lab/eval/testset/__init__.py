"""Generated test sets for a knowledge base without gold labels (``rag-lab testset``): see
:mod:`.generate` (the offline generators) and :mod:`.build` (sampling, filters, the dataset)."""

from __future__ import annotations

from rag_lab.eval.testset.build import REPORT_FILE, WEAKER_NOTE, TestsetReport, build_testset

__all__ = ["REPORT_FILE", "WEAKER_NOTE", "TestsetReport", "build_testset"]
