"""Generated test sets for a knowledge base without gold labels (``rag-lab testset``): see
:mod:`.generate` (the offline generators), :mod:`.build` (sampling, filters, the dataset),
:mod:`.llm` and :mod:`.llm_build` (questions and answers written by a chat model, multi-hop
questions over the entity graph's links, :mod:`.links`) and :mod:`.from_file` (questions people
asked, gold guessed from the KB's search)."""

from __future__ import annotations

from rag_lab.eval.testset.build import LLM_NOTE, REPORT_FILE, WEAKER_NOTE, TestsetReport, build_testset
from rag_lab.eval.testset.llm_build import build_llm_testset

__all__ = ["LLM_NOTE", "REPORT_FILE", "WEAKER_NOTE", "TestsetReport", "build_llm_testset", "build_testset"]
