"""``rag-lab runs list | show ID | compare ID ID [ID…] | tag ID TAG``: the workspace's run history
(:mod:`rag_lab.eval.runs`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _root(args: argparse.Namespace) -> Path:
    from rag_lab.commands.cache import cache_paths

    return cache_paths(args)[0]


def cmd_runs_list(args: argparse.Namespace) -> int:
    from rag_lab.eval.runs import load_runs

    entries = load_runs(_root(args))
    if not entries:
        print(f"no run recorded in {_root(args)} yet: rag-lab eval records each run")
        return 0
    for e in entries[-args.last :] if args.last else entries:
        print(e.line())
    return 0


def cmd_runs_show(args: argparse.Namespace) -> int:
    from rag_lab.eval.runs import find_run, load_runs

    print(json.dumps(find_run(load_runs(_root(args)), args.run).to_dict(), indent=1, ensure_ascii=False))
    return 0


def cmd_runs_tag(args: argparse.Namespace) -> int:
    from rag_lab.eval.runs import tag_run

    e = tag_run(_root(args), args.run, args.tag)
    print(e.line())
    return 0


def cmd_runs_compare(args: argparse.Namespace) -> int:
    from rag_lab.eval.gate import GatePolicy
    from rag_lab.eval.runs import compare_runs
    from rag_lab.lab.pages import runs_html

    cmp = compare_runs(_root(args), args.runs, GatePolicy(allow_underpowered=True))
    print(cmp.table())
    if cmp.gate is not None:
        print()
        print(cmp.gate.table(max_changes=args.changes))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        page = out / "runs_compare.html"
        page.write_text(runs_html(cmp), encoding="utf-8")
        print(f"wrote {page}", file=sys.stderr)
    return 0


def add_runs_command(subparsers: Any) -> None:
    p = subparsers.add_parser("runs", help="the workspace's recorded evaluations: list, show, compare, tag")
    sub = p.add_subparsers(dest="runs_command", required=True)
    s = sub.add_parser("list", help="every recorded run, oldest first: id, time, suites, headline metrics, tags")
    s.add_argument("--last", type=int, default=0, metavar="N", help="only the N latest")
    s.set_defaults(func=cmd_runs_list)
    s = sub.add_parser("show", help="one run's record (params, models, code version, means) as JSON")
    s.add_argument("run", help="a run id (or its start) or a tag")
    s.set_defaults(func=cmd_runs_show)
    s = sub.add_parser(
        "compare",
        help="runs side by side (means, stage metrics, params that differ); two runs also question by question "
        "with the gate's paired statistics",
    )
    s.add_argument("runs", nargs="+", help="two or more run ids (or starts) or tags")
    s.add_argument("--out", default=None, metavar="DIR", help="also write DIR/runs_compare.html")
    s.add_argument("--changes", type=int, default=10, metavar="N", help="changed questions listed (two runs)")
    s.set_defaults(func=cmd_runs_compare)
    s = sub.add_parser("tag", help="tag a run (e.g. baseline); a tag names one run at a time")
    s.add_argument("run")
    s.add_argument("tag")
    s.set_defaults(func=cmd_runs_tag)
