"""``rag-lab testset --kb KB --n N --out DIR [--seed S]``: a generated test set for your own KB."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_testset_command", "cmd_testset"]


def cmd_testset(args: argparse.Namespace) -> int:
    from rag_lab.eval.testset.build import REPORT_FILE, WEAKER_NOTE, build_testset
    from rag_lab.lab.lab import Lab

    overrides = {"workspace": args.workspace} if args.workspace else {}
    lab = Lab.from_config(args.config, **overrides)
    ds, report = build_testset(
        lab, args.kb, args.n, args.out, seed=args.seed, depth=args.depth, overwrite=args.overwrite
    )
    print(report)
    print(f"wrote {ds.path}: {len(ds.corpus)} documents, {len(ds.queries)} questions, {REPORT_FILE}")
    print(f"note: {WEAKER_NOTE}", file=sys.stderr)
    print(f"next: rag-lab eval --dataset {ds.path}", file=sys.stderr)
    return 0


def add_testset_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "testset",
        help="generate questions with known gold from a KB's chunks (offline, no model; weaker than human labels)",
    )
    p.add_argument("--kb", required=True, help="knowledge base name")
    p.add_argument("--n", type=int, required=True, help="number of questions to keep")
    p.add_argument("--out", required=True, help="output dataset folder (corpus.jsonl, queries.jsonl)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--depth", type=int, default=10, help="answerable: the source document in the top DEPTH hits")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_testset)
