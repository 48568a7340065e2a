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

SCORE_TOLERANCE = 1e-6
"""Absolute tolerance when the stored capture's scores are compared with a live run's.

Model scores are float32 cosines (ONNX MiniLM vectors, then a dot product). On one machine and
one code version they are reproduced bit for bit (``tests/models/test_determinism.py``), but the
stored file was written once: another CPU (AVX2 / AVX-512 kernels in onnxruntime and numpy) or a
change of the summation kernel moves a score by an ulp or two — the stored 0.76097113 became
0.76097119 when the cosines moved from BLAS to ``row_dots``. One float32 ulp near 1 is 1.2e-7;
1e-6 allows ~8 of them, far below anything a threshold, a ranking or a 4-digit display sees.
"""


def rows_close(a: list[dict[str, Any]], b: list[dict[str, Any]], tol: float = SCORE_TOLERANCE) -> bool:
    """Equal rows (same keys, same non-float values), floats within ``tol``."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        for k, v in x.items():
            w = y[k]
            if isinstance(v, float) or isinstance(w, float):
                if not (isinstance(w, int | float) and isinstance(v, int | float) and abs(v - w) <= tol):
                    return False
            elif v != w:
                return False
    return True


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
