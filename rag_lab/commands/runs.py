"""``rag-lab runs list | show ID | compare ID ID [ID…] | tag ID TAG``: the workspace's run history
(:mod:`rag_lab.eval.runs`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rag_lab.cliutil import Command, command, opt


def _root(args: argparse.Namespace) -> Path:
    from rag_lab.commands.cache import cache_paths

    return cache_paths(args)[0]


@command(
    "list",
    "every recorded run, oldest first: id, time, suites, headline metrics, tags",
    opt("--last", "only the N latest", type=int, default=0, metavar="N"),
)
def cmd_runs_list(args: argparse.Namespace) -> int:
    from rag_lab.eval.runs import load_runs

    entries = load_runs(_root(args))
    if not entries:
        print(f"no run recorded in {_root(args)} yet: rag-lab eval records each run")
        return 0
    for e in entries[-args.last :] if args.last else entries:
        print(e.line())
    return 0


@command(
    "show",
    "one run's record (params, models, code version, means) as JSON",
    opt("run", "a run id (or its start) or a tag"),
)
def cmd_runs_show(args: argparse.Namespace) -> int:
    from rag_lab.eval.runs import find_run, load_runs

    print(json.dumps(find_run(load_runs(_root(args)), args.run).to_dict(), indent=1, ensure_ascii=False))
    return 0


@command("tag", "tag a run (e.g. baseline); a tag names one run at a time", opt("run"), opt("tag"))
def cmd_runs_tag(args: argparse.Namespace) -> int:
    from rag_lab.eval.runs import tag_run

    e = tag_run(_root(args), args.run, args.tag)
    print(e.line())
    return 0


@command(
    "compare",
    "runs side by side (means, stage metrics, params that differ); two runs also question by question "
    "with the gate's paired statistics",
    opt("runs", "two or more run ids (or starts) or tags", nargs="+"),
    opt("--out", "also write DIR/runs_compare.html", metavar="DIR"),
    opt("--changes", "changed questions listed (two runs)", type=int, default=10, metavar="N"),
)
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


RUNS_COMMAND = Command(
    "runs",
    "the workspace's recorded evaluations: list, show, compare, tag",
    subcommands=(cmd_runs_list, cmd_runs_show, cmd_runs_compare, cmd_runs_tag),
)
