"""The import graph of the ``rag_lab`` package, read from the sources with :mod:`ast` (nothing is
imported), and the import closure of a module.

An edge is any ``import rag_lab.x`` / ``from rag_lab.x import y`` / ``from . import y`` / literal
``importlib.import_module("rag_lab.x")``, wherever it sits: a function-level (lazy) import is a
dependency too. Imports under ``if TYPE_CHECKING:`` are annotations only and do not count.

Used by ``tests/test_import_layers.py`` (one-way layers) and by the stage cache, whose code
version of a stage is the hash of the sources of its import closure
(:func:`closure_digest`), so editing any module a stage runs invalidates its cached outputs.

The stage cache asks for closures of up to ~170 modules in every new process; parsing them costs
about a second on this machine. So the imports of each module of the installed package are kept
between processes in :data:`IMPORTS_MEMO`, keyed by the SHA-256 of the module's name and source
(and invalidated as a whole when this file changes): reading and hashing the sources is all a
warm process does. The layers test (:func:`module_edges`) always parses.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

import rag_lab

__all__ = ["closure_digest", "import_closure", "imported_names", "module_edges", "package_modules"]

PACKAGE_ROOT = Path(rag_lab.__file__).resolve().parent

#: the imports of the installed package's modules, kept between processes: a derived file beside
#: the package's bytecode, like a ``.pyc`` (a folder that cannot be written is parsed each time)
IMPORTS_MEMO = PACKAGE_ROOT / "__pycache__" / f"importgraph.{sys.implementation.cache_tag}.json"


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


_STATEMENT_LIKE = (ast.stmt, ast.excepthandler, ast.match_case)


def imported_names(tree: ast.AST, module: str, is_package: bool, calls: bool = True) -> list[tuple[list[str], int]]:
    """(candidate target names, line) per import; the first candidate that is a module wins.

    ``calls=False`` skips the search for ``import_module("…")`` calls, which sit in expressions:
    only statements are visited then (import statements are never inside an expression), about
    three times faster. Callers pass it when the source does not contain ``import_module``."""
    out: list[tuple[list[str], int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not calls and not isinstance(child, _STATEMENT_LIKE):
                continue
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


def _source_names(mod: str, path: Path, source: bytes) -> list[tuple[list[str], int]]:
    """:func:`imported_names` of a module's source (the call search only where it can find one)."""
    tree = ast.parse(source, filename=str(path))
    return imported_names(tree, mod, path.name == "__init__.py", calls=b"import_module" in source)


def _resolve(candidates: list[str], modules: dict[str, Path]) -> str | None:
    for name in candidates:
        if name in modules:
            return name
    name = candidates[-1]
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges_from(mod: str, names: list[tuple[list[str], int]], modules: dict[str, Path], top: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for candidates, line in names:
        if not candidates[-1].startswith(top):
            continue
        target = _resolve(candidates, modules)
        if target is None or target == top or target == mod:
            continue
        out.setdefault(target, line)
    return out


def _edges_of(mod: str, path: Path, modules: dict[str, Path], top: str) -> dict[str, int]:
    """``{imported module: first line}`` of one module (see :func:`module_edges`)."""
    return _edges_from(mod, _source_names(mod, path, path.read_bytes()), modules, top)


class _ImportsMemo:
    """:func:`imported_names` per (module, source), loaded from and saved to one JSON file.

    Saved with a write to a temporary file and a rename (a reader never sees half a file; of two
    writers the last one wins). Bounded: when it holds more than :data:`MAX_FACTOR` × the package's
    modules, only the entries read or added by this process are kept."""

    MAX_FACTOR = 4

    def __init__(self, path: Path) -> None:
        self.path = path
        self.extractor = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
        self.entries: dict[str, object] = {}
        self.used: set[str] = set()
        self.dirty = False
        self.parsed = 0  # modules parsed by this process (the rest came from the file)
        self._lock = threading.Lock()
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("extractor") == self.extractor:
                entries = data.get("entries")
                self.entries = entries if isinstance(entries, dict) else {}

    def names(self, mod: str, path: Path) -> list[tuple[list[str], int]]:
        source = path.read_bytes()
        is_package = path.name == "__init__.py"
        key = hashlib.sha256(f"{mod}\0{int(is_package)}\0".encode() + source).hexdigest()
        with self._lock:
            found = self.entries.get(key)
            self.used.add(key)
        if isinstance(found, list):
            return [(list(c), int(line)) for c, line in found]
        names = _source_names(mod, path, source)
        with self._lock:
            self.entries[key] = [[c, line] for c, line in names]
            self.dirty = True
            self.parsed += 1
        return names

    def save(self, n_modules: int) -> None:
        with self._lock:
            if not self.dirty:
                return
            if len(self.entries) > self.MAX_FACTOR * max(n_modules, 1):
                self.entries = {k: v for k, v in self.entries.items() if k in self.used}
            text = json.dumps({"extractor": self.extractor, "entries": self.entries}, separators=(",", ":"))
            self.dirty = False
        tmp = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, 0o644)  # readable like the .pyc files beside it (mkstemp makes it 0600)
            os.replace(tmp, self.path)
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


@functools.lru_cache(maxsize=1)
def _memo() -> _ImportsMemo:
    return _ImportsMemo(IMPORTS_MEMO)


def module_edges(root: Path = PACKAGE_ROOT) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` inside the package (the root package itself,
    the public facade that resolves names lazily by string, is left out as a target). Modules
    that import nothing of the package are left out."""
    modules = package_modules(root)
    edges = {mod: _edges_of(mod, path, modules, root.name) for mod, path in modules.items()}
    return {mod: e for mod, e in edges.items() if e}


@functools.lru_cache(maxsize=8)
def _modules_cached(root: Path) -> dict[str, Path]:
    return package_modules(root)


@functools.lru_cache(maxsize=4096)
def _edges_of_cached(root: Path, mod: str) -> dict[str, int]:
    modules = _modules_cached(root)
    return _edges_from(mod, _memo().names(mod, modules[mod]), modules, root.name)


def import_closure(roots: Iterable[str], root: Path = PACKAGE_ROOT) -> list[str]:
    """The modules ``roots`` import, directly or not (the roots included), sorted. A module's
    package ``__init__`` is part of it too (Python runs it first).

    For the installed package, only the modules of the closure are parsed (once per process):
    a stage cache key reads the imports of 4–170 modules, not the whole package's, and a module
    whose source is unchanged since an earlier process is not parsed again (:data:`IMPORTS_MEMO`)."""
    if root == PACKAGE_ROOT:
        modules = _modules_cached(root)

        def edges_of(m: str) -> dict[str, int]:
            return _edges_of_cached(root, m)
    else:  # a copy of the package (tests edit one): its closure parsed afresh, nothing kept
        modules = package_modules(root)

        def edges_of(m: str) -> dict[str, int]:
            return _edges_of(m, modules[m], modules, root.name)

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
        todo.extend(edges_of(m))
        parent = m.rpartition(".")[0]
        if parent and parent != top and parent in modules:
            todo.append(parent)
    if root == PACKAGE_ROOT:
        _memo().save(len(modules))
    return sorted(seen)


def closure_digest(roots: Iterable[str], root: Path = PACKAGE_ROOT) -> str:
    """SHA-256 hex of the names and source bytes of :func:`import_closure` of ``roots``."""
    modules = _modules_cached(root) if root == PACKAGE_ROOT else package_modules(root)
    h = hashlib.sha256()
    for m in import_closure(tuple(roots), root):
        h.update(m.encode() + b"\x00" + modules[m].read_bytes() + b"\x1e")
    return h.hexdigest()
