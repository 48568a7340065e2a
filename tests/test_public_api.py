from __future__ import annotations

import subprocess
import sys

import rag_lab


def test_every_public_name_resolves():
    for name in rag_lab.__all__:
        assert getattr(rag_lab, name) is not None, name


def test_import_is_light():
    code = "import sys, rag_lab; heavy = [m for m in ('onnxruntime', 'faiss', 'bm25s', 'jieba', 'openai', 'pandas') if m in sys.modules]; print(heavy)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
