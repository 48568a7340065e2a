"""`rag-lab` command line: ingest a folder, ask a question (streamed), evaluate a dataset."""
from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import yaml


def _lab(args: argparse.Namespace):
    from rag_lab.lab.lab import Lab

    overrides = {}
    if args.workspace:
        overrides["workspace"] = args.workspace
    return Lab.from_config(args.config, **overrides)


def cmd_ingest(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"rag-lab ingest: {path}: no such file or folder", file=sys.stderr)
        return 2
    lab = _lab(args)
    report = lab.ingest(path, kb=args.kb, progress=not args.quiet)
    print(report)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from rag_lab.stream.bus import BusEventType

    lab = _lab(args)

    def show(ev) -> None:
        if ev.type == BusEventType.FINAL_ANSWER:
            sys.stdout.write(str(ev.data.get("content", "")))
            sys.stdout.flush()
        elif ev.type == BusEventType.TOOL_RESULT and ev.data.get("output") and not args.quiet:
            print(f"· {ev.data.get('tool_name')}: {ev.data.get('output')}", file=sys.stderr)

    parsed = {}
    for kv in args.param or []:
        if "=" not in kv:
            raise ValueError(f"--param {kv!r}: expected FIELD=VALUE")
        key, value = kv.split("=", 1)
        parsed[key.strip()] = yaml.safe_load(value)
    run = lab.ask(args.question, kb=args.kb, params=parsed or None, on_event=show, snapshots=False)
    print()
    cited = set(run.cited_chunk_ids)
    if run.references:
        print("\nReferences:")
        for i, r in enumerate(run.references, 1):
            mark = "*" if r.id in cited else " "
            print(f" {mark}[{i}] {r.score:.3f} {r.knowledge_title or r.knowledge_filename} ({r.id})")
    if run.error:
        print(f"error: {run.error}", file=sys.stderr)
        return 1
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from rag_lab.eval.datasets import load_dataset
    from rag_lab.eval.runner import evaluate_lab, write_retrieval_report

    lab = _lab(args)
    ds = load_dataset(args.dataset)
    kb = args.kb or ds.name
    lab.ingest_documents([{"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata} for d in ds.corpus], kb=kb)
    result = asyncio.run(evaluate_lab(lab, ds, kb, n_queries=args.limit))
    for k, v in result.summary().items():
        print(f"{k:>14}: {v:.4f}")
    paths = write_retrieval_report(result, args.out, f"{ds.name}_retrieval")
    print("wrote " + ", ".join(map(str, paths)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="rag-lab", description=__doc__)
    ap.add_argument("--config", default=None, help="lab YAML (default: config/lab.yaml)")
    ap.add_argument("--workspace", default=None, help="override the workspace folder")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="ingest a folder (.txt, .md, .html) into a knowledge base")
    p.add_argument("path")
    p.add_argument("--kb", required=True, help="knowledge base name (created when missing)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("ask", help="ask a question; the answer streams to the terminal")
    p.add_argument("question")
    p.add_argument("--kb", action="append", help="knowledge base name (repeatable; default: all)")
    p.add_argument("--param", action="append", metavar="FIELD=VALUE", help="PipelineParams override")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_ask)

    from rag_lab.lab.replay import add_replay_command
    from rag_lab.stream.serve_cli import add_serve_command

    add_replay_command(sub)
    add_serve_command(sub)

    p = sub.add_parser("eval", help="ingest a dataset and score retrieval on its questions")
    p.add_argument("--dataset", required=True, help="a name under datasets/ or a folder path")
    p.add_argument("--kb", default=None)
    p.add_argument("--limit", type=int, default=None, help="first N questions")
    p.add_argument("--out", default="reports")
    p.set_defaults(func=cmd_eval)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, LookupError) as exc:
        print(f"rag-lab {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
