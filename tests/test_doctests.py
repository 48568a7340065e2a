"""The ``>>>`` examples of the public entry points run as doctests (and each one has examples)."""

from __future__ import annotations

import doctest
import importlib

import pytest

ENTRY_POINTS = [
    ("rag_lab.reranking.mmr", "select_mmr"),
    ("rag_lab.reranking.composite", "composite_score"),
    ("rag_lab.retrieval.fusion", "fuse_hits"),
    ("rag_lab.eval.metrics", "evaluate_retrieval"),
    ("rag_lab.eval.gate", "run_gate"),
    ("rag_lab.lab.lab", "Lab.ask"),
    ("rag_lab.lab.lab", "Lab.step"),
]


@pytest.mark.parametrize(("module", "name"), ENTRY_POINTS, ids=[n for _, n in ENTRY_POINTS])
def test_entry_point_examples_run(module: str, name: str) -> None:
    mod = importlib.import_module(module)
    obj = mod
    for part in name.split("."):
        obj = getattr(obj, part)
    finder = doctest.DocTestFinder(recurse=False)
    tests = [t for t in finder.find(obj, name, module=mod, globs=vars(mod).copy()) if t.examples]
    assert tests, f"{module}.{name} has no >>> examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted >= 1, f"{module}.{name}: {result}"
