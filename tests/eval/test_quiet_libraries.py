"""Issue 26: no red stderr boxes in the notebooks from the libraries rag_lab drives — jieba's
dictionary-loading notices, and ragas' per-sample warning for a question with no retrieved
context (the NaN and its reason are in the report) — silenced where rag_lab calls them, not by
hiding stderr."""

from __future__ import annotations

import logging
import math
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_jieba_initialises_without_writing_to_stderr() -> None:
    code = (
        "from rag_lab.searchutil.text import tokenize_simple\n"
        "from rag_lab.pipeline.plugins.query_expansion import generate_expansion_variants\n"
        "print(sorted(tokenize_simple('长城的历史有多长')))\n"
        "print(generate_expansion_variants('什么是长城的历史，它有多长？', '', 3))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() and done.stderr == ""


def test_ragas_no_context_notice_is_dropped_and_the_nan_kept(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("ragas")
    from rag_lab.eval.ragas_adapter import score_samples
    from rag_lab.eval.ragas_adapter.samples import RagasSample

    empty = RagasSample("q1", "Who designed it?", [], [], "Mara Vell", ["d1"], ["Mara Vell designed it."], "")
    with caplog.at_level(logging.WARNING):
        res = score_samples([empty], ["id_context_precision"])
    assert math.isnan(res.values["id_context_precision"][0])
    assert not [r for r in caplog.records if "No retrieved context IDs" in r.getMessage()]
    assert not logging.getLogger("ragas.metrics._context_precision").filters  # removed after scoring
