"""Every number a notebook's prose states is checked by the notebook: a markdown cell whose text
(headings, links and inline code aside) contains a number is followed by a code cell with an
``assert`` (the shared setup and ingest cells skipped), so the notebooks lane, which executes every
cell, fails when the prose and the code drift apart."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

BUILD = Path(__file__).resolve().parents[2] / "notebooks" / "build_notebooks.py"

_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w)")
_LIST_MARKER = re.compile(r"^(\s*)\d+[.)]\s", re.M)


def _load_build() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_notebooks", BUILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stated_numbers(markdown: str) -> list[str]:
    """The numbers a markdown cell states: not in headings, link targets or texts, inline code or
    the markers of a numbered list."""
    text = "\n".join(line for line in markdown.splitlines() if not line.lstrip().startswith("#"))
    return _NUMBER.findall(_LINK.sub("", _CODE_SPAN.sub("", _LIST_MARKER.sub(r"\1", text))))


def unchecked_claims(cells: list[tuple[str, str]], boilerplate: set[str]) -> list[tuple[int, str]]:
    """``(index, first line)`` of each markdown cell stating a number whose next code cell (the
    ``boilerplate`` cells skipped) has no ``assert``."""
    out = []
    for i, (kind, src) in enumerate(cells):
        if kind != "md" or not stated_numbers(src):
            continue
        following = (c for k, c in cells[i + 1 :] if k == "code" and c not in boilerplate)
        if not re.search(r"^\s*assert\b|\bassert\s", next(following, ""), re.M):
            out.append((i, src.strip().splitlines()[0]))
    return out


def test_stated_numbers_skip_headings_links_and_code() -> None:
    assert stated_numbers("# 01 · Tour\nSee [02](02_search.ipynb); `k = 60` is set; 13 of 22 kept, 0.5.") == [
        "13",
        "22",
        "0.5",
    ]
    assert stated_numbers("No number here, only `rerank_top_k = 4`.") == []
    assert stated_numbers("Steps:\n1. ingest;\n2. label 8 questions") == ["8"]


def test_a_claim_without_an_assert_is_found() -> None:
    cells = [
        ("md", "# Title"),
        ("code", "SETUP"),
        ("md", "The threshold keeps 13 of 22."),
        ("code", "SETUP"),  # boilerplate does not count
        ("code", "print(kept)"),
        ("md", "MMR picks 4."),
        ("code", "picks = mmr()\nassert len(picks) == 4"),
    ]
    assert unchecked_claims(cells, {"SETUP"}) == [(2, "The threshold keeps 13 of 22.")]
    cells[4] = ("code", "print(kept)\nassert kept == 13")
    assert unchecked_claims(cells, {"SETUP"}) == []


@pytest.fixture(scope="module")
def build() -> ModuleType:
    return _load_build()


def test_every_number_in_the_notebooks_prose_is_asserted(build: ModuleType) -> None:
    boilerplate = {v for k, v in vars(build).items() if k.isupper() and isinstance(v, str)}
    problems = [
        f"{name}: no assert after the markdown cell {i} ({first!r})"
        for name, cells in build.NOTEBOOKS.items()
        for i, first in unchecked_claims(cells, boilerplate)
    ]
    assert not problems, "\n".join(problems)
