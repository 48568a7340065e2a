"""One-way layers: the import graph of ``rag_lab`` has no cycle and no upward edge.

Every module under ``rag_lab/`` is parsed with :mod:`ast` (:mod:`rag_lab.importgraph`; nothing is
imported). An edge is any ``import rag_lab.x`` / ``from rag_lab.x import y`` / ``from . import y``
/ a literal ``importlib.import_module("rag_lab.x")``, **wherever it sits**: a function-level (lazy)
import is still a dependency. Only imports under ``if TYPE_CHECKING:`` do not count.

Units are the subpackages of ``rag_lab`` (``rag_lab.retrieval.engine`` belongs to ``retrieval``)
and the top-level modules (``cli``, ``demo``, ``asyncutil``), with one exception: the HTTP server
of the stream package (:data:`SERVE_MODULES`) is its own unit ``serve``, which sits beside ``lab``
(it builds a Lab per process and serves sessions), while the rest of ``stream`` (bus, managers,
handler, coalescing) is a bottom-layer service that the pipeline publishes to. Likewise
``rag_lab.lab.launch`` (``make lab``: ingests the demo KB, starts JupyterLab) is an entry point,
unit ``launch``, at the top with ``cli``, ``commands`` (the command-line modules) and ``demo``.

The layer order, bottom first (a unit may import its own layer and the layers below):

====  ==================================================================
 0    types, asyncutil, cliutil, importgraph, blobstore
 1    models, prompts, searchutil, tools, stream, observability
 2    reranking, retrieval, modelcontext
 3    knowledge                      (workspace builds indexes; retrieval
                                      sees the workspace only through
                                      TYPE_CHECKING annotations)
 4    memory, web, session
 5    pipeline
 6    tuning                         (the fast post-retrieval evaluator)
 7    eval                           (numbers, reports, verdicts; no
                                      drawing, no Lab built here)
 8    lab, serve                     (lab: everything that draws)
 9    cli, commands, demo, launch
====  ==================================================================

``lab`` is the drawing layer: widgets, plots, the HTML pages and the labelling panel live there,
above the evaluation they draw. :data:`DRAWING_LIBRARIES` are imported by no unit below it.

Edges to the root package (``import rag_lab`` for ``__version__``) are ignored: the root
``__init__`` is the public facade and resolves its names lazily by string.

Besides the unit graph, modules must not form cycles among themselves either (the ones this test
removed: ``eval.runner`` ↔ ``report`` ↔ ``ragas_adapter``, ``lab.lab`` ↔ ``capture`` ↔ ``frames``,
``cli`` ↔ ``eval.cli`` ↔ ``stream.serve_cli``). :data:`KNOWN_MODULE_CYCLES` lists the cycles
still inside one unit; the test fails if a new one appears, and also if a listed one is gone (so
the list only shrinks).
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict

import pytest

from rag_lab.importgraph import imported_names, package_modules
from rag_lab.importgraph import module_edges as _module_edges


@functools.cache
def module_edges() -> dict[str, dict[str, int]]:
    """The package's edges, parsed once for the tests of this file (each reads them whole)."""
    return _module_edges()


LAYERS: list[set[str]] = [
    {"types", "asyncutil", "cliutil", "importgraph", "blobstore"},
    {"models", "prompts", "searchutil", "tools", "stream", "observability"},
    {"reranking", "retrieval", "modelcontext"},
    {"knowledge"},
    {"memory", "web", "session"},
    {"pipeline"},
    {"tuning"},
    {"eval"},
    {"lab", "serve"},
    {"cli", "commands", "demo", "launch"},
]
SERVE_MODULES = frozenset(
    {
        "rag_lab.stream.server",
        "rag_lab.stream.server_http",
        "rag_lab.stream.server_follow",
        "rag_lab.stream.server_generate",
        "rag_lab.stream.server_lifecycle",
        "rag_lab.stream.server_service",
        "rag_lab.stream.server_sse",
        "rag_lab.stream.server_state",
        "rag_lab.stream.serve_cli",
    }
)
#: executable entry points that live inside a subpackage but sit at the top (unit ``launch``)
ENTRY_MODULES = frozenset({"rag_lab.lab.launch"})
#: the unit everything that draws lives in
DRAWING_LAYER = "lab"
#: libraries that draw (widgets, figures, notebook display, HTML templates): imported only at or
#: above :data:`DRAWING_LAYER`
DRAWING_LIBRARIES = ("ipywidgets", "matplotlib", "IPython.display", "jinja2")
#: module cycles still inside one unit (frozensets of module names); may only shrink
KNOWN_MODULE_CYCLES: set[frozenset[str]] = set()


def _unit(module: str) -> str:
    if module in SERVE_MODULES:
        return "serve"
    if module in ENTRY_MODULES:
        return "launch"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "rag_lab"


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for ts in graph.values() for t in ts})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


def _describe(comp: frozenset[str], edges: dict[str, dict[str, int]], unit_of=lambda m: m) -> str:
    lines = []
    for a, targets in sorted(edges.items()):
        for b, line in sorted(targets.items()):
            if unit_of(a) in comp and unit_of(b) in comp and unit_of(a) != unit_of(b):
                lines.append(f"  {a}:{line} -> {b}")
    return "\n".join(lines)


def test_every_unit_has_a_layer() -> None:
    layered = set().union(*LAYERS)
    units = {_unit(m) for m in package_modules()} - {"rag_lab"}
    assert units <= layered, f"units without a layer (add them to LAYERS): {sorted(units - layered)}"
    assert sum(len(layer) for layer in LAYERS) == len(layered), "a unit is listed in two layers"


def test_no_upward_edge_between_units() -> None:
    level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    bad = []
    for a, targets in sorted(module_edges().items()):
        ua = _unit(a)
        for b, line in sorted(targets.items()):
            ub = _unit(b)
            if ua != ub and ua in level and ub in level and level[ub] > level[ua]:
                bad.append(f"{a}:{line} imports {b} ({ua}, layer {level[ua]} -> {ub}, layer {level[ub]})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_eval_imports_nothing_from_lab() -> None:
    """eval sits below the drawing layer: it builds no Lab (callers pass one, or a factory) and
    draws nothing (pages, figures and panels are in lab)."""
    bad = [
        f"{a}:{line} imports {b}"
        for a, targets in sorted(module_edges().items())
        if _unit(a) == "eval"
        for b, line in sorted(targets.items())
        if _unit(b) == "lab"
    ]
    assert not bad, "eval -> lab imports:\n" + "\n".join(bad)


def _drawing_imports(module: str, path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for candidates, line in imported_names(tree, module, path.name == "__init__.py"):
        for lib in DRAWING_LIBRARIES:
            if any(c == lib or c.startswith(lib + ".") for c in candidates):
                found.append((lib, line))
                break
    return found


def test_no_drawing_library_below_the_drawing_layer() -> None:
    level = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    floor = level[DRAWING_LAYER]
    bad = [
        f"{module}:{line} imports {lib} ({_unit(module)}, layer {level[_unit(module)]})"
        for module, path in sorted(package_modules().items())
        if level.get(_unit(module), floor) < floor
        for lib, line in _drawing_imports(module, path)
    ]
    assert not bad, f"drawing libraries below the drawing layer ({DRAWING_LAYER}):\n" + "\n".join(bad)


def test_the_drawing_check_sees_each_library(tmp_path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import matplotlib\n"
        "def f():\n    import ipywidgets as w\n    from IPython.display import HTML\n"
        "from IPython import display\nfrom IPython import get_ipython\nimport jinja2.sandbox\n"
        "from matplotlib.figure import Figure\nimport jinja2x\n",
        encoding="utf-8",
    )
    assert _drawing_imports("rag_lab.eval.m", path) == [
        ("ipywidgets", 5),
        ("IPython.display", 6),
        ("IPython.display", 7),
        ("jinja2", 9),
        ("matplotlib", 10),
    ]


def test_no_cycle_between_units() -> None:
    edges = module_edges()
    graph: dict[str, set[str]] = defaultdict(set)
    for a, targets in edges.items():
        for b in targets:
            if _unit(a) != _unit(b):
                graph[_unit(a)].add(_unit(b))
    cycles = _cycles(graph)
    assert not cycles, "\n".join(f"cycle {sorted(c)}:\n{_describe(c, edges, _unit)}" for c in cycles)


def test_no_cycle_betweenpackage_modules() -> None:
    edges = module_edges()
    graph = {a: set(t) for a, t in edges.items()}
    found = set(_cycles(graph))
    new = found - KNOWN_MODULE_CYCLES
    assert not new, "\n".join(f"module cycle {sorted(c)}:\n{_describe(c, edges)}" for c in new)
    gone = KNOWN_MODULE_CYCLES - found
    assert not gone, f"these cycles are gone, remove them from KNOWN_MODULE_CYCLES: {[sorted(c) for c in gone]}"


def test_the_checker_sees_lazy_imports_and_skips_type_checking() -> None:
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from rag_lab.lab.lab import Lab\n"
        "def f():\n    from rag_lab.eval.report import EvalReport\n    import rag_lab.cli\n"
        "from . import frames\n"
        "import importlib\nimportlib.import_module('rag_lab.stream.server')\n"
    )
    got = imported_names(ast.parse(src), "rag_lab.lab.capture", False)
    assert [c for c, _ in got if c[-1].startswith("rag_lab")] == [
        ["rag_lab.eval.report.EvalReport", "rag_lab.eval.report"],
        ["rag_lab.cli"],
        ["rag_lab.lab.frames", "rag_lab.lab"],
        ["rag_lab.stream.server"],
    ]
    # the statement-only walk (sources without ``import_module``) finds the same imports, at
    # any depth of statements: function, class, try/except/finally, with, match, loops
    nested = (
        "import rag_lab.a\n"
        "def f():\n    class C:\n        def g(self):\n            import rag_lab.b\n"
        "try:\n    import rag_lab.c\nexcept ImportError:\n    import rag_lab.d\nelse:\n    pass\n"
        "finally:\n    from rag_lab import e\n"
        "with open('x') as fh:\n    import rag_lab.f\n"
        "match 1:\n    case 1:\n        import rag_lab.g\n"
        "for i in range(2):\n    while True:\n        import rag_lab.h\n"
        "if TYPE_CHECKING:\n    import rag_lab.skipped\nelse:\n    import rag_lab.i\n"
        "x = [lambda: 1 for _ in ()]\n"
    )
    full = imported_names(ast.parse(nested), "rag_lab.m", False)
    assert imported_names(ast.parse(nested), "rag_lab.m", False, calls=False) == full
    assert [c[0] for c, _ in full] == [f"rag_lab.{x}" for x in "abcdefghi"]
    # with calls=False the expression-level call is (by contract) not looked for
    assert imported_names(ast.parse(src), "rag_lab.lab.capture", False, calls=False)[-1][0] != ["rag_lab.stream.server"]

    from rag_lab.importgraph import import_closure

    closure = import_closure(["rag_lab.retrieval.hybrid_search"])
    assert {"rag_lab.retrieval.image_recall", "rag_lab.retrieval.fusion", "rag_lab.types.params"} <= set(closure)
    assert "rag_lab.eval.gate" not in closure and "rag_lab.retrieval" in closure  # package __init__ runs first
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    assert _unit("rag_lab.stream.server") == "serve" and _unit("rag_lab.stream.bus") == "stream"


def test_edges_and_closure_of_a_small_package_with_every_kind_of_import(tmp_path) -> None:
    """On a package written here: relative imports in a package ``__init__`` and in a module, an
    ``import_module("…")`` literal as the only edge, a ``TYPE_CHECKING`` import, the top package
    itself, and imports of other packages before ours; then the closure and its digest."""
    from rag_lab.importgraph import closure_digest, import_closure

    root = tmp_path / "pkgx"
    (root / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "import os\nfrom . import a\n",
        "a.py": "import json\nimport pkgx\nimport importlib\nimportlib.import_module('pkgx.b')\n",
        "b.py": "from .sub import c\n",
        "sub/__init__.py": "from . import c\nfrom .c import f\n",
        "sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkgx import d\ndef f():\n    return 1\n",
        "d.py": "from pkgx.sub.c import f\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")
    assert _module_edges(root) == {
        "pkgx": {"pkgx.a": 2},
        "pkgx.a": {"pkgx.b": 4},
        "pkgx.b": {"pkgx.sub.c": 1},
        "pkgx.sub": {"pkgx.sub.c": 1},
        "pkgx.d": {"pkgx.sub.c": 1},
    }
    assert import_closure(["pkgx.a"], root) == ["pkgx.a", "pkgx.b", "pkgx.sub", "pkgx.sub.c"]
    with pytest.raises(ValueError, match=r"not modules of pkgx: \['pkgx.zzz'\]"):
        import_closure(["pkgx.zzz"], root)
    before = closure_digest(["pkgx.a"], root)
    (root / "d.py").write_text(files["d.py"] + "# edited\n", encoding="utf-8")
    assert closure_digest(["pkgx.a"], root) == before  # d is imported only for type checking
    (root / "sub/c.py").write_text(files["sub/c.py"] + "# edited\n", encoding="utf-8")
    assert closure_digest(["pkgx.a"], root) != before
