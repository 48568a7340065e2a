"""Smaller modules by responsibility: no module under ``rag_lab/`` is longer than
:data:`MAX_LINES` lines unless its module docstring says why it stays whole.

The reason is a docstring line starting with :data:`MARKER` (``Kept whole:``) followed by the
reason itself, e.g. ``Kept whole: one class whose methods share a connection.`` A comment or a
string elsewhere in the file does not count. Long modules that have no such reason get split by
responsibility (a package whose ``__init__`` re-exports the old names, or sibling modules), as
``eval/gate/``, ``eval/ragas_adapter/``, ``eval/report/`` and ``stream/server*.py`` were.
"""

from __future__ import annotations

import ast

import pytest

from rag_lab.importgraph import PACKAGE_ROOT, package_modules

MAX_LINES = 400
MARKER = "Kept whole:"


def kept_whole_reason(source: str) -> str:
    """The reason given after :data:`MARKER` in the module docstring of ``source`` (the rest of
    that paragraph, on one line), or "" when there is none."""
    doc = ast.get_docstring(ast.parse(source), clean=True) or ""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith(MARKER):
            parts = [line.strip()[len(MARKER) :].strip()]
            for more in lines[i + 1 :]:
                if not more.strip():
                    break
                parts.append(more.strip())
            return " ".join(p for p in parts if p)
    return ""


def _long_modules() -> dict[str, tuple[int, str]]:
    out = {}
    for path in package_modules().values():
        text = path.read_text(encoding="utf-8")
        n = len(text.splitlines())
        if n > MAX_LINES:
            out[str(path.relative_to(PACKAGE_ROOT.parent))] = (n, kept_whole_reason(text))
    return out


def test_every_long_module_says_why_it_stays_whole() -> None:
    missing = [f"{path}: {n} lines" for path, (n, why) in sorted(_long_modules().items()) if not why]
    assert not missing, (
        f"modules over {MAX_LINES} lines without a {MARKER!r} line in their docstring "
        "(split them by responsibility, or say why they stay whole):\n  " + "\n  ".join(missing)
    )


def test_the_reasons_are_sentences() -> None:
    """A bare marker or a one-word reason is not a reason."""
    thin = [f"{p}: {why!r}" for p, (_, why) in sorted(_long_modules().items()) if why and len(why.split()) < 4]
    assert not thin, "reasons too short to tell a maintainer anything:\n  " + "\n  ".join(thin)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            '"""Doc.\n\nKept whole: one class whose methods share a connection."""\n',
            "one class whose methods share a connection.",
        ),
        (
            '"""Doc.\n\nKept whole: the tokenizer and\nits tables go together.\n\nMore."""\n',
            "the tokenizer and its tables go together.",
        ),
        ('"""Doc."""\n# Kept whole: a comment is not the docstring\n', ""),
        ('x = 1\n"""Kept whole: a later string is not the docstring"""\n', ""),
        ('"""Doc.\n\nKept whole:\n"""\n', ""),
        ('"""Nothing to see."""\n', ""),
        ("x = 1\n", ""),
    ],
)
def test_the_reason_is_read_from_the_module_docstring_only(source: str, reason: str) -> None:
    assert kept_whole_reason(source) == reason


def test_the_limit_is_checked_on_every_module() -> None:
    """The scan sees the whole package (including subpackages) and long modules exist to check."""
    modules = package_modules()
    assert "rag_lab.eval.gate.compare" in modules and "rag_lab.lab.lab" in modules
    assert any(n > MAX_LINES for n, _ in _long_modules().values())
