"""The import graph of the ``rag_lab`` package, read from the sources with :mod:`ast` (nothing is
imported), and the import closure of a module.

An edge is any ``import rag_lab.x`` / ``from rag_lab.x import y`` / ``from . import y`` / literal
``importlib.import_module("rag_lab.x")``, wherever it sits: a function-level (lazy) import is a
dependency too. Imports under ``if TYPE_CHECKING:`` are annotations only and do not count.

Used by ``tests/test_import_layers.py`` (one-way layers) and by the stage cache, whose code
version of a stage is the hash of the sources of its import closure
(:func:`closure_digest`), so editing any module a stage runs invalidates its cached outputs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import rag_lab

__all__ = ["closure_digest", "import_closure", "imported_names", "module_edges", "package_modules"]

PACKAGE_ROOT = Path(rag_lab.__file__).resolve().parent


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """``{module name: source path}`` of every module under ``root`` (vendored code left out)."""
    return {_module_name(p, root): p for p in sorted(root.rglob("*.py")) if "_vendor" not in p.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[list[str], int]]:
    """(candidate target names, line) per import; the first candidate that is a module wins."""
    out: list[tuple[list[str], int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.orelse:
                    visit_stmt(stmt)
                continue
            visit_stmt(child)

    def visit_stmt(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            out.extend(([a.name], node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import sub`` depends on pkg.sub when sub is a module, else on pkg
            out.extend(([f"{target}.{a.name}", target], node.lineno) for a in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append(([node.args[0].value], node.lineno))
        visit(node)

    visit(tree)
    return out


def _resolve(candidates: list[str], modules: dict[str, Path]) -> str | None:
    for name in candidates:
        if name in modules:
            return name
    name = candidates[-1]
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_edges(root: Path = PACKAGE_ROOT) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` inside the package (the root package itself,
    the public facade that resolves names lazily by string, is left out as a target)."""
    modules = package_modules(root)
    top = root.name
    edges: dict[str, dict[str, int]] = defaultdict(dict)
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for candidates, line in imported_names(tree, mod, path.name == "__init__.py"):
            if not candidates[-1].startswith(top):
                continue
            target = _resolve(candidates, modules)
            if target is None or target == top or target == mod:
                continue
            edges[mod].setdefault(target, line)
    return dict(edges)


@functools.lru_cache(maxsize=8)
def _edges_cached(root: Path) -> dict[str, dict[str, int]]:
    return module_edges(root)


def import_closure(roots: Iterable[str], root: Path = PACKAGE_ROOT) -> list[str]:
    """The modules ``roots`` import, directly or not (the roots included), sorted. A module's
    package ``__init__`` is part of it too (Python runs it first)."""
    edges = _edges_cached(root) if root == PACKAGE_ROOT else module_edges(root)
    modules = package_modules(root)
    top = root.name
    todo = [r for r in roots]
    unknown = [r for r in todo if r not in modules]
    if unknown:
        raise ValueError(f"import_closure: not modules of {top}: {unknown}")
    seen: set[str] = set()
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(edges.get(m, {}))
        parent = m.rpartition(".")[0]
        if parent and parent != top and parent in modules:
            todo.append(parent)
    return sorted(seen)


def closure_digest(roots: Iterable[str], root: Path = PACKAGE_ROOT) -> str:
    """SHA-256 hex of the names and source bytes of :func:`import_closure` of ``roots``."""
    modules = package_modules(root)
    h = hashlib.sha256()
    for m in import_closure(tuple(roots), root):
        h.update(m.encode() + b"\x00" + modules[m].read_bytes() + b"\x1e")
    return h.hexdigest()
