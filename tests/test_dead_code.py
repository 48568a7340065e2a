"""No dead code: vulture finds nothing unused in ``rag_lab/`` at 80 % confidence (unused imports,
variables, arguments, unreachable code). Lower-confidence findings are public API or framework
hooks (``__getattr__``, widget callbacks, HTTP handlers) and are not checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_vulture_finds_no_dead_code_at_80_percent() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vulture", str(ROOT / "rag_lab"), "--min-confidence", "80"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and not done.stdout.strip(), f"dead code (vulture):\n{done.stdout}{done.stderr}"


def test_vulture_would_report_an_unused_import_and_unreachable_code(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import os\n\n\ndef f(a):\n    return a\n    print(a)\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "vulture", str(tmp_path), "--min-confidence", "80"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "unused import 'os'" in done.stdout and "unreachable code after 'return'" in done.stdout
