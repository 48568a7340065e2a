"""Mutation testing of the critical modules, one module at a time, and its per-module score.

    python scripts/mutation.py list                  # the modules ([tool.rag_lab.mutation.modules])
    python scripts/mutation.py run fusion rerank     # mutmut on each, in turn
    python scripts/mutation.py report [fusion ...]   # killed / total and the survivors' names
    python scripts/mutation.py show fusion NAME      # a survivor's diff

``run`` gives each module its own scratch directory ``mutants/<module>/`` (git-ignored) holding
links to the sources, a ``pyproject.toml`` whose ``[tool.mutmut]`` mutates that module alone and
selects only its tests (with this project's pytest settings), and runs ``mutmut run`` there,
niced, with one worker and ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (pytest loads the plugins named in
``pytest_add_cli_args``, as the Makefile's ``PYTEST`` does). Re-running a module re-tests only
what changed (mutmut keeps its results beside the mutants).

The score counts killed mutants (by a failing test, a timeout or the type checker) over all
mutants that ran; "no tests" (a mutant in code the selected tests never execute) counts as a
survivor: the code is not tested.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRATCH = ROOT / "mutants"
LINKED = ("rag_lab", "tests", "benchmarks", "datasets", "config", "docs", "reports")
KILLED = {1: "killed", 3: "killed", 36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 37: "type check"}


def _project() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def modules() -> dict[str, dict[str, Any]]:
    """name -> {source, tests}; every module is in ``[tool.mutmut] only_mutate`` and back."""
    tool = _project()["tool"]
    table: dict[str, dict[str, Any]] = tool["rag_lab"]["mutation"]["modules"]
    listed = set(tool["mutmut"]["only_mutate"])
    sources = {m["source"] for m in table.values()}
    if listed != sources:
        raise SystemExit(f"[tool.mutmut] only_mutate and [tool.rag_lab.mutation.modules] differ: {listed ^ sources}")
    return table


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def _scratch(name: str, module: dict[str, Any]) -> Path:
    """``mutants/<name>/`` with links to the sources and a pyproject for this module alone."""
    project = _project()
    work = SCRATCH / name
    work.mkdir(parents=True, exist_ok=True)
    for entry in LINKED:
        link = work / entry
        if not link.exists():
            link.symlink_to(ROOT / entry, target_is_directory=True)
    mutmut = project["tool"]["mutmut"]
    pytest_cfg = project["tool"]["pytest"]["ini_options"]
    lines = [
        "# written by scripts/mutation.py: one module of [tool.rag_lab.mutation.modules]",
        "[tool.mutmut]",
        f"source_paths = {_toml_list(mutmut['source_paths'])}",
        f"only_mutate = {_toml_list([module['source']])}",
        f"pytest_add_cli_args = {_toml_list(mutmut['pytest_add_cli_args'])}",
        f"pytest_add_cli_args_test_selection = {_toml_list(module['tests'])}",
        f"also_copy = {_toml_list(mutmut['also_copy'])}",
        f"timeout_multiplier = {float(mutmut.get('timeout_multiplier', 15.0))}",
        "",
        "[tool.pytest.ini_options]",
    ]
    for key, value in pytest_cfg.items():
        lines.append(f"{key} = {_toml_list(value) if isinstance(value, list) else json.dumps(value)}")
    (work / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _refresh_copies(work / "mutants", module["source"])
    return work


def _refresh_copies(copy_root: Path, mutated: str) -> None:
    """mutmut copies the sources once and keeps the copies on later runs: bring the copies of the
    modules it does not mutate up to date (it regenerates the mutated module's own mutants)."""
    if not copy_root.exists():
        return
    for src in (ROOT / "rag_lab").rglob("*"):
        if not src.is_file() or "__pycache__" in src.parts:
            continue
        rel = src.relative_to(ROOT)
        dst = copy_root / rel
        if rel.as_posix() == mutated:
            continue
        if not dst.exists() or dst.stat().st_mtime != src.stat().st_mtime:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _mutmut() -> str:
    exe = Path(sys.executable).with_name("mutmut")
    return str(exe) if exe.exists() else "mutmut"


def _forget_survivors(name: str, module: dict[str, Any]) -> list[str]:
    """Mark the module's survivors unchecked (mutmut re-tests a mutant only when its function
    changed, not when tests were added); returns their names."""
    meta = SCRATCH / name / "mutants" / (module["source"] + ".meta")
    if not meta.exists():
        return []
    data = json.loads(meta.read_text(encoding="utf-8"))
    codes = data.get("exit_code_by_key", {})
    again = [k for k, v in codes.items() if v in (0, 5, 33)]
    for k in again:
        codes[k] = None
    meta.write_text(json.dumps(data), encoding="utf-8")
    return again


def run(names: list[str], nice: int, only: list[str] | None = None, retest: bool = False) -> int:
    table = modules()
    for name in names:
        work = _scratch(name, table[name])
        if retest:
            only = _forget_survivors(name, table[name]) or None
            if only is None:
                print(f"== {name}: no survivors to re-test")
                continue
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "RAGAS_DO_NOT_TRACK": "true"}
        env["TOKENIZERS_PARALLELISM"] = "false"
        print(f"== {name}: mutmut run in {work.relative_to(ROOT)}", flush=True)
        cmd = ["nice", "-n", str(nice), _mutmut(), "run", "--max-children", "1", *(only or [])]
        rc = subprocess.call(cmd, cwd=work, env=env)
        if rc != 0:
            print(f"{name}: mutmut exited with {rc}", file=sys.stderr)
            return rc
        print(report([name]))
    return 0


def results(name: str, module: dict[str, Any]) -> dict[str, int | None] | None:
    """mutant name -> exit code, from mutmut's ``.meta`` file of the module (None: not run)."""
    meta = SCRATCH / name / "mutants" / (module["source"] + ".meta")
    if not meta.exists():
        return None
    data = json.loads(meta.read_text(encoding="utf-8"))
    got: dict[str, int | None] = data.get("exit_code_by_key", {})
    return got


def report(names: list[str] | None = None) -> str:
    table = modules()
    rows = ["module          killed/total  score  survivors (no tests)"]
    for name in names or list(table):
        got = results(name, table[name])
        if got is None:
            rows.append(f"{name:<15} not run")
            continue
        done = {k: v for k, v in got.items() if v is not None}
        killed = [k for k, v in done.items() if v in KILLED]
        survived = sorted(k for k, v in done.items() if v == 0)
        untested = sorted(k for k, v in done.items() if v in (5, 33))
        other = sorted(k for k, v in done.items() if v not in KILLED and v not in (0, 5, 33))
        score = f"{100 * len(killed) / len(done):.0f}%" if done else "-"
        pending = len(got) - len(done)
        rows.append(
            f"{name:<15} {len(killed):>5}/{len(done):<6}  {score:>5}  {len(survived)} ({len(untested)})"
            + (f", {pending} not checked" if pending else "")
            + (f", {len(other)} suspicious/other" if other else "")
        )
        for k in survived + untested + other:
            rows.append(f"    {k}{'  (no tests)' if k in untested else ''}")
    return "\n".join(rows)


def show(name: str, mutant: str) -> int:
    work = SCRATCH / name
    return subprocess.call([_mutmut(), "show", mutant], cwd=work)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    r = sub.add_parser("run")
    r.add_argument("modules", nargs="*", help="default: every module")
    r.add_argument("--nice", type=int, default=10)
    r.add_argument("--only", nargs="+", help="mutant name globs (mutmut's), e.g. '*_search_quantized*'")
    r.add_argument("--retest-survivors", action="store_true", help="re-test the last run's survivors (new tests)")
    rep = sub.add_parser("report")
    rep.add_argument("modules", nargs="*")
    sh = sub.add_parser("show")
    sh.add_argument("module")
    sh.add_argument("mutant")
    c = sub.add_parser("clean")
    c.add_argument("modules", nargs="*")
    args = ap.parse_args(argv)
    table = modules()
    for name in getattr(args, "modules", None) or []:
        if name not in table:
            ap.error(f"unknown module {name!r}; known: {', '.join(table)}")
    if args.cmd == "list":
        for name, m in table.items():
            print(f"{name:<15} {m['source']}  <- {' '.join(m['tests'])}")
        return 0
    if args.cmd == "run":
        return run(args.modules or list(table), args.nice, args.only, args.retest_survivors)
    if args.cmd == "report":
        print(report(args.modules or None))
        return 0
    if args.cmd == "show":
        return show(args.module, args.mutant)
    for name in args.modules or list(table):
        shutil.rmtree(SCRATCH / name, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
