"""Evaluation datasets: the on-disk format, a validating loader and deterministic subsets.

A dataset is a folder with two JSON Lines files (UTF-8, one JSON object per ``\\n``-terminated
line; see ``datasets/README.md``)::

    corpus.jsonl   {"id": str, "title": str, "text": str, "metadata": {...}}
    queries.jsonl  {"id": str, "question": str, "answers": [str, ...],
                    "gold_ids": [corpus id, ...], "metadata": {...}}

``title`` and ``metadata`` are optional (default ``""`` and ``{}``); every other field is
required. A corpus id is the document (knowledge) id the pipeline reports for a retrieved chunk,
so ``gold_ids`` are compared with retrieved knowledge ids.

Validation errors raise :class:`DatasetError` naming the file, the 1-based line, the field and the
offending value (shortened to 80 characters). Blank lines are skipped and listed in
:attr:`Dataset.skipped_lines`.

The package is split by responsibility: :mod:`.schema` (rows, :class:`Dataset`, errors),
:mod:`.loading` (the validating loader), :mod:`.inputs` (ragas / HF JSONL, TREC topics +
qrels, DataFrames via ``Dataset.from_frame``), :mod:`.converters` (the one writer, SQuAD and BEIR
converters), :mod:`.raw` and :mod:`.bundled` (the converters of the bundled third-party datasets,
run by ``scripts/convert_datasets.py``).
"""

from __future__ import annotations

from rag_lab.eval.datasets import schema
from rag_lab.eval.datasets.converters import convert_beir, convert_squad, jsonl_bytes, write_dataset
from rag_lab.eval.datasets.inputs import from_ragas_dataset, read_ragas_jsonl, read_trec
from rag_lab.eval.datasets.loading import load_dataset
from rag_lab.eval.datasets.schema import *  # noqa: F403  (the names of schema.__all__)

__all__ = [
    *schema.__all__,
    "convert_beir",
    "convert_squad",
    "from_ragas_dataset",
    "jsonl_bytes",
    "load_dataset",
    "read_ragas_jsonl",
    "read_trec",
    "write_dataset",
]
