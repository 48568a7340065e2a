"""Fixtures of the evaluation tests: a real offline lab holding a small HotpotQA slice."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

SMALL_HOTPOT = ("hotpotqa_hipporag100", 10, 32)  # 10 questions, their 20 gold documents + 12 distractors


@pytest.fixture(scope="session")
def small_spec():
    from rag_lab.eval.runner import SuiteSpec

    return SuiteSpec(*SMALL_HOTPOT)


@pytest.fixture(scope="session")
def small_ds(small_spec):
    return small_spec.load()


@pytest.fixture(scope="session")
def eval_lab(tmp_path_factory, small_spec, small_ds):
    """Lab with the offline defaults (ONNX MiniLM, embedding re-scorer, extractive answers) and
    the small HotpotQA slice ingested as ``small_spec.kb_name``. Tests that wrap its services
    must restore them (``handle.disable()``)."""
    from rag_lab.eval.runner import ingest_dataset
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("eval_ws"))
    ingest_dataset(lab, small_ds, small_spec.kb_name)
    yield lab
    lab.workspace.close()
