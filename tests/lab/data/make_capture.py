"""Regenerate the stored capture the plot and widget tests read.

    .venv/bin/python tests/lab/data/make_capture.py

It asks the question below of the four tiny documents of ``tests/conftest.py`` (chunked small,
so that several chunks reach rerank, MMR and the merge), fully offline, and saves the run with a
fusion trace as ``lighthouse.capture.jsonl`` next to this file. The tests also import
``build_lab`` to make live runs with the same setup.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CAPTURE = HERE / "lighthouse.capture.jsonl"
QUESTION = "Who built the Brightwater lighthouse?"
#: a low threshold lets the volcano chunk through, so MMR has four candidates and λ matters
PARAMS: dict[str, Any] = {"rerank_threshold": 0.1}
#: small chunks: the lighthouse document becomes three chunks that the merge fuses again
CHUNKING: dict[str, Any] = {"chunk_size": 120, "chunk_overlap": 20}


def write_docs(folder: Path) -> Path:
    from tests.conftest import DOCS

    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def build_lab(workspace: Path, docs_dir: Path):
    """A Lab over ``docs_dir`` in the knowledge base ``demo`` with the small chunking."""
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=workspace)
    lab.kb("demo", **CHUNKING)
    lab.ingest(docs_dir, kb="demo", progress=False)
    return lab


def make_capture(path: Path = CAPTURE) -> Path:
    from rag_lab.lab.capture import save_capture
    from rag_lab.lab.frames import fusion_trace

    with tempfile.TemporaryDirectory() as tmp:
        lab = build_lab(Path(tmp) / "ws", write_docs(Path(tmp) / "docs"))
        run = lab.ask(QUESTION, kb="demo", params=PARAMS)
        out = save_capture(run, path, fusion=fusion_trace(lab, run))
        lab.workspace.close()
    return out


if __name__ == "__main__":
    p = make_capture()
    print(f"wrote {p.relative_to(ROOT)} ({p.stat().st_size} bytes)")
