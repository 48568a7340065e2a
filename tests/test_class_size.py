"""Classes split by responsibility: no class under ``rag_lab/`` is longer than :data:`MAX_LINES`
lines, counted from its ``class`` statement (decorators left out) to its last line.

A class that grows past the limit is split: a coherent group of methods moves into a collaborator
the class holds, or into a mixin in a sibling module named for that responsibility, and the wiring
of a facade moves into a factory (``Lab`` builds its services in ``rag_lab.lab.factory``).
Nested classes are measured too, each on its own.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from rag_lab.importgraph import PACKAGE_ROOT, package_modules

MAX_LINES = 300


@dataclass(frozen=True)
class ClassSize:
    """One class of a module: its dotted name inside the module, first line and length."""

    name: str
    line: int
    lines: int


def class_sizes(source: str) -> list[ClassSize]:
    """Every class defined in ``source`` (nested ones included, named ``Outer.Inner``), with its
    length in lines from the ``class`` line to the class's last line, in source order."""
    out: list[ClassSize] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno if child.end_lineno is not None else child.lineno
                out.append(ClassSize(name, child.lineno, end - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sorted(out, key=lambda c: c.line)


def long_classes(max_lines: int = MAX_LINES) -> list[str]:
    """``path:line Class: N lines`` for each class of the package longer than ``max_lines``."""
    out = []
    for path in sorted(package_modules().values()):
        for c in class_sizes(path.read_text(encoding="utf-8")):
            if c.lines > max_lines:
                out.append(f"{path.relative_to(PACKAGE_ROOT.parent)}:{c.line} {c.name}: {c.lines} lines")
    return out


def test_no_class_is_longer_than_the_limit() -> None:
    offenders = long_classes()
    assert not offenders, (
        f"classes over {MAX_LINES} lines (split them by responsibility: a collaborator or a mixin "
        "in a sibling module, a factory for wiring):\n  " + "\n  ".join(offenders)
    )


def _class_source(name: str, body_lines: int) -> str:
    """A class whose statement plus ``body_lines`` body lines make ``body_lines + 1`` lines."""
    body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
    return f"class {name}:\n{body}"


def test_the_measure_counts_from_the_class_line_to_its_last_line() -> None:
    source = "import os\n\n\n" + _class_source("Long", 300) + "\n\n" + _class_source("Fits", 299)
    sizes = {c.name: c for c in class_sizes(source)}
    assert sizes["Long"].lines == 301 and sizes["Long"].line == 4
    assert sizes["Fits"].lines == 300
    over = [c.name for c in sizes.values() if c.lines > MAX_LINES]
    assert over == ["Long"]


def test_nested_and_decorated_classes_are_measured() -> None:
    source = (
        "import dataclasses\n"
        "@dataclasses.dataclass\n"
        "class Outer:\n"
        "    a: int = 1\n"
        "    class Inner:\n"
        "        def f(self) -> int:\n"
        "            return 2\n"
        "    b: int = 3\n"
        "def g() -> None:\n"
        "    class Local:\n"
        "        pass\n"
    )
    sizes = {c.name: (c.line, c.lines) for c in class_sizes(source)}
    assert sizes == {"Outer": (3, 6), "Outer.Inner": (5, 3), "Local": (10, 2)}


def test_the_scan_sees_every_module() -> None:
    """The scan reads the whole package (subpackages included) and finds classes to measure."""
    modules = package_modules()
    assert "rag_lab.lab.lab" in modules and "rag_lab.session.sqlite_store" in modules
    lab = class_sizes(modules["rag_lab.lab.lab"].read_text(encoding="utf-8"))
    assert any(c.name == "Lab" for c in lab)
    assert long_classes(max_lines=50), "a lower limit must find classes: the scan is not reading the package"
