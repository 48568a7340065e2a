"""The ```python blocks of README.md and docs/*.md run as written (issue 26).

Each file's blocks run in order in one namespace (a later block may use an earlier one's ``lab``),
in a temporary working directory holding a tiny ``docs/`` folder and the repo's ``config/``, with
the knowledge bases ``mydocs`` and ``demo`` ingested from it. A block that needs what a test
cannot have is preceded by ``<!-- snippet: skip (reason) -->``; the skips are counted."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK_RE = re.compile(r"(<!--\s*snippet:\s*skip\s*\(([^)]*)\)\s*-->\s*\n)?```python\n(.*?)```", re.S)

DOC = """# The Brightwater Lighthouse

The Brightwater lighthouse was built by Ada Stone in 1852. The rerank stage keeps the candidates
whose relevance passes the threshold, at most rerank_top_k of them.
"""


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, skip reason or None)`` of every ```python block of ``path``."""
    text = path.read_text(encoding="utf-8")
    return [(text[: m.start(3)].count("\n") + 1, m.group(3), m.group(2)) for m in _BLOCK_RE.finditer(text)]


def test_the_docs_have_python_snippets_and_the_skips_are_few() -> None:
    blocks = [b for f in FILES for b in python_blocks(f)]
    skipped = [b for b in blocks if b[2] is not None]
    assert len(blocks) >= 4
    assert len(skipped) <= 2, skipped  # a skip needs a reason the test cannot meet (server, Ray, GPU)


@pytest.mark.parametrize(
    "path", [f for f in FILES if any(b[2] is None for b in python_blocks(f))], ids=lambda p: p.name
)
def test_python_snippets_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "lighthouse.md").write_text(DOC, encoding="utf-8")
    shutil.copytree(ROOT / "config", tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path / ".rag_lab")
    for kb in ("mydocs", "demo"):
        lab.ingest("docs/", kb=kb)
    lab.workspace.close()
    ns: dict = {"__name__": "__snippet__"}
    for line, code, skip in python_blocks(path):
        if skip is not None:
            continue
        try:
            exec(compile(code, f"{path.name}:{line}", "exec"), ns)
        except Exception as exc:  # noqa: BLE001 - name the snippet
            raise AssertionError(f"{path.name} line {line}: the snippet fails: {exc!r}") from exc
    assert os.getcwd() == str(tmp_path)
