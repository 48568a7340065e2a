"""The ```python blocks of README.md and docs/*.md run as written (issue 26).

Each file's blocks run in order in one namespace (a later block may use an earlier one's ``lab``),
in a temporary working directory holding a tiny ``docs/`` folder and the repo's ``config/``, with
the knowledge bases ``mydocs`` and ``demo`` ingested from it. A block that needs what a test
cannot have is preceded by ``<!-- snippet: skip (reason) -->``; the skips are counted."""

from __future__ import annotations

import argparse
import os
import re
import shlex
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


_SHELL_RE = re.compile(r"```(?:bash|console|sh|shell)\n(.*?)```", re.S)
_LONG_OPT_RE = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def rag_lab_commands(path: Path) -> list[tuple[int, list[str]]]:
    """``(line, tokens after rag-lab)`` of every ``rag-lab`` command line of the shell blocks of
    ``path`` (continuation lines joined, ``#`` comments and a ``$`` prompt dropped)."""
    text = path.read_text(encoding="utf-8")
    out: list[tuple[int, list[str]]] = []
    for m in _SHELL_RE.finditer(text):
        first = text[: m.start(1)].count("\n") + 1
        logical: list[tuple[int, str]] = []  # (first physical line, text with continuations joined)
        pending = False
        for i, physical in enumerate(m.group(1).split("\n")):
            if pending:
                logical[-1] = (logical[-1][0], logical[-1][1] + " " + physical.rstrip("\\"))
            else:
                logical.append((i, physical.rstrip("\\")))
            pending = physical.endswith("\\")
        for i, line in logical:
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                tokens = line.split()
            if tokens[:1] == ["$"]:
                tokens = tokens[1:]
            for j, tok in enumerate(tokens):
                if tok.endswith("rag-lab") and "/" not in tok.replace(".venv/bin/", ""):
                    out.append((first + i, tokens[j + 1 :]))
                    break
    return out


def _subcommand(parser: argparse.ArgumentParser, tokens: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser the leading words of ``tokens`` name, and the words used."""
    used: list[str] = []
    for tok in tokens:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or tok not in subs[0].choices:
            break
        parser = subs[0].choices[tok]
        used.append(tok)
    return parser, used


def stale_commands(files: list[Path]) -> tuple[int, list[str]]:
    """Long options checked, and the ``rag-lab`` subcommands / options of ``files`` that do not exist."""
    from rag_lab.cli import build_parser

    root = build_parser()
    n_checked, stale = 0, []
    for path in files:
        for line, tokens in rag_lab_commands(path):
            while len(tokens) > 1 and tokens[0] in ("--config", "--workspace"):  # before the subcommand
                n_checked += 1
                tokens = tokens[2:]
            parser, used = _subcommand(root, tokens)
            if tokens and not used and not tokens[0].startswith("-"):
                stale.append(f"{path.name}:{line}: rag-lab has no subcommand {tokens[0]!r}")
                continue
            known = set(parser._option_string_actions)
            for tok in tokens[len(used) :]:
                for opt in _LONG_OPT_RE.findall(tok.split("=", 1)[0] if tok.startswith("--") else tok):
                    n_checked += 1
                    if opt not in known:
                        stale.append(f"{path.name}:{line}: rag-lab {' '.join(used)} has no option {opt}")
    return n_checked, stale


def test_every_rag_lab_option_the_docs_name_exists() -> None:
    """Cheap and catches stale docs: each ``rag-lab SUBCOMMAND --option`` of a shell block parses."""
    n_checked, stale = stale_commands(FILES)
    assert not stale, "\n".join(stale)
    assert n_checked >= 20


def test_the_option_check_catches_stale_docs(tmp_path: Path) -> None:
    md = tmp_path / "stale.md"
    md.write_text(
        "```bash\n$ .venv/bin/rag-lab cache clear [--vectors|--bogus] --model K  # a --comment\n"
        'rag-lab ask "q" --kb x \\\n  --no-such-flag=1\nrag-lab frobnicate --kb x\n```\n',
        encoding="utf-8",
    )
    n_checked, stale = stale_commands([md])
    assert n_checked == 5
    assert stale == [
        "stale.md:2: rag-lab cache clear has no option --bogus",
        "stale.md:3: rag-lab ask has no option --no-such-flag",
        "stale.md:5: rag-lab has no subcommand 'frobnicate'",
    ]
