"""Generated test sets for a knowledge base without gold labels (``rag-lab testset``): one
pipeline (:mod:`.pipeline`: source chunks, filters, saturation, the dataset) with pluggable
question writers — the rule-based forms (:mod:`.build` over :mod:`.generate` and :mod:`.bridge`)
and a chat model (:mod:`.llm_build` over :mod:`.llm`, multi-hop questions over the entity graph's
links, :mod:`.links`) — and questions people asked, gold guessed (:mod:`.from_file`,
:mod:`.from_sessions`)."""

from __future__ import annotations

from rag_lab.eval.testset.build import LLM_NOTE, REPORT_FILE, WEAKER_NOTE, TestsetReport, build_testset
from rag_lab.eval.testset.llm_build import build_llm_testset

__all__ = ["LLM_NOTE", "REPORT_FILE", "WEAKER_NOTE", "TestsetReport", "build_llm_testset", "build_testset"]
