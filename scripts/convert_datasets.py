#!/usr/bin/env python3
"""Convert the raw third-party QA datasets into rag_lab's corpus.jsonl / queries.jsonl format.

Usage (from the repository root)::

    python scripts/convert_datasets.py --raw ../shared/datasets-raw --out datasets [--only NAME]

Each converted dataset gets ``corpus.jsonl``, ``queries.jsonl``, ``LICENSE`` and
``PROVENANCE.md``. Raw inputs are checked against the sha256 recorded in the raw PROVENANCE.md
files, and the output is byte-for-byte deterministic (no timestamps, fixed key and row order).
The format is described in ``datasets/README.md``; the loader is ``rag_lab.eval.datasets``.
The converters live in :mod:`rag_lab.eval.datasets.bundled` (the gate slices in
:mod:`rag_lab.eval.datasets.bundled_hard`, the command line in :mod:`rag_lab.commands.convert`) (one writer for every dataset file:
:func:`rag_lab.eval.datasets.jsonl_bytes`); this script is their command line.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from rag_lab.commands.convert import main
except ModuleNotFoundError:  # run from a checkout without an installed rag_lab
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rag_lab.commands.convert import main

if __name__ == "__main__":
    raise SystemExit(main())
