"""`rag-lab` command line: ingest a folder, ask a question (streamed), evaluate a dataset.

``ingest`` exits 0 when every file was ingested or skipped for a stated reason, 1 when some files
failed (each is listed with its reason; the others are ingested), 2 on a usage error or, with
``--strict``, at the first file that fails."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from rag_lab.cliutil import QUIET, command, command_parser, flag, many, opt, param_overrides, run_command
from rag_lab.commands import PARAM, lab_from

if TYPE_CHECKING:
    from rag_lab.stream.bus import BusEvent


@command(
    "ingest",
    "ingest a file or folder into a knowledge base",  # the file kinds are added by build_parser
    opt("path"),
    opt("--kb", "knowledge base name (created when missing)", required=True),
    opt("--tenant", "tenant owning a new KB (default 1; see docs/security.md)", type=int),
    flag("--strict", "stop at the first file that cannot be read"),
    opt("--max-file-mb", "skip files above this size (MB; 0 = no cap; default 256)", type=float, default=256.0),
    opt(
        "--prepare",
        "also embed the texts the re-scorer and the extractive answerer will read (auto: when the lab uses "
        "them; default: the config's ingest.prepare, else auto)",
        choices=["auto", "all", "none"],
    ),
    QUIET,
)
def cmd_ingest(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"rag-lab ingest: {path}: no such file or folder", file=sys.stderr)
        return 2
    lab = lab_from(args)
    if args.tenant is not None:
        from rag_lab.lab.knowledge import folder_sample

        # created for that tenant (its embedder chosen by its text, as ingest does), or checked against it
        lab.kb(args.kb, tenant_id=args.tenant, sample=folder_sample(path))
    cap = None if args.max_file_mb <= 0 else int(args.max_file_mb * 1024 * 1024)
    if args.prepare is not None:
        from rag_lab.lab.lab import prepare_texts_for

        lab.prepare_texts = prepare_texts_for({"prepare": args.prepare}, lab.config.get("models") or {}, "--prepare")
    report = lab.ingest(path, kb=args.kb, progress=not args.quiet, strict=args.strict, max_file_bytes=cap)
    print(report)
    kb = lab.workspace.store.get_kb(report.kb_id)
    choice = kb.metadata.get("embedder_choice") if kb is not None else None
    if isinstance(choice, dict):  # embedder: auto chose when the KB was created
        print(f"embedder: {choice.get('embedder', '?')} ({choice.get('reason', '')})")
    if report.failed or report.skipped or report.warnings:
        print(report.details())
    return 1 if report.failed else 0


class _Streamed(TypedDict):
    """What ``ask`` has streamed so far: the raw answer, the characters shown, the references."""

    raw: str
    shown: int
    refs: list[object]


@command(
    "ask",
    "ask a question; the answer streams to the terminal (exit 3: the model failed, fallback answer shown)",
    opt("question"),
    many("--kb", "knowledge base name (repeatable; default: all)"),
    PARAM,
    QUIET,
)
def cmd_ask(args: argparse.Namespace) -> int:
    from rag_lab.stream.bus import BusEventType

    if not args.question.strip():  # the same rule and wording as POST /knowledge-chat
        raise ValueError("query: must not be empty")
    lab = lab_from(args)
    from rag_lab.lab.replay import display_answer

    streamed: _Streamed = {"raw": "", "shown": 0, "refs": []}

    def show(ev: BusEvent) -> None:
        if ev.type == BusEventType.REFERENCES:
            streamed["refs"] = list(ev.data.get("references") or [])
        elif ev.type == BusEventType.FINAL_ANSWER:
            # citation tags become [n], n = the reference's number below; a tag still arriving
            # is held back until it is complete
            streamed["raw"] += str(ev.data.get("content", ""))
            text = display_answer(streamed["raw"], streamed["refs"], partial=not ev.data.get("done"))
            sys.stdout.write(text[streamed["shown"] :])
            streamed["shown"] = max(streamed["shown"], len(text))
            sys.stdout.flush()
        elif ev.type == BusEventType.TOOL_RESULT and ev.data.get("output") and not args.quiet:
            print(f"· {ev.data.get('tool_name')}: {ev.data.get('output')}", file=sys.stderr)

    parsed = param_overrides(args.param, check=False)
    if parsed:
        from rag_lab.pipeline.knobs import apply_overrides

        apply_overrides(lab.params, parsed, source="--param")  # unknown names: did-you-mean
    run = lab.ask(args.question, kb=args.kb, params=parsed or None, on_event=show, snapshots=False)
    print()
    for w in run.warnings:  # knobs that could not change this answer
        print(f"warning: {w}", file=sys.stderr)
    cited = set(run.cited_chunk_ids)
    if run.references:
        print("\nReferences:")
        for i, r in enumerate(run.references, 1):
            mark = "*" if r.id in cited else " "
            print(f" {mark}[{i}] {r.score:.3f} {r.knowledge_title or r.knowledge_filename} ({r.id})")
    if run.degraded:  # the model failed: the fallback answer was printed above
        print(f"degraded: the chat model failed ({run.error}); the answer above is the fallback", file=sys.stderr)
        return 3
    if run.error:
        print(f"error: {run.error}", file=sys.stderr)
        return 1
    return 0


@command(
    "reindex",
    "copy a knowledge base from the SQLite store into Milvus",
    opt("--kb", "knowledge base name or id", required=True),
    opt("--engine", "target engine (default: milvus)", choices=["milvus"], default="milvus"),
    opt("--uri", "Milvus uri (default: the KB's engine in the lab config, else <workspace>/milvus.db)"),
)
def cmd_reindex(args: argparse.Namespace) -> int:
    """Copy a KB's chunks from the SQLite store into an external engine (Milvus)."""
    lab = lab_from(args)
    kb = lab.workspace.get_kb(args.kb)
    routed = lab.engines.config_for(kb)
    cfg = dict(routed) if routed["type"] == "milvus" else dict(lab.engines.default)
    if cfg.get("type") != "milvus":
        cfg = {"type": "milvus", "uri": str(lab.workspace.root / "milvus.db")}
    if args.uri:
        cfg["uri"] = args.uri
    from rag_lab.retrieval.milvus_engine import MilvusConfig, MilvusEngineError

    engine = lab.engines.milvus(cfg)
    try:
        counts = engine.index_documents(kb, embedder=lab._embedder_for(kb))
    except MilvusEngineError as exc:
        print(f"rag-lab reindex: {exc}", file=sys.stderr)
        return 1
    finally:
        lab.engines.close()
    print(f"reindexed {kb.name!r} into Milvus at {engine.config.uri}: {counts}")
    if routed["type"] != "milvus" or MilvusConfig.from_mapping(routed).key != engine.config.key:
        print(
            f"note: the lab config does not route {kb.name!r} to this store; set "
            f"knowledge_bases: {{{kb.name}: {{engine: {{type: milvus, uri: {engine.config.uri}}}}}}} to search it there",
            file=sys.stderr,
        )
    return 0


@command(
    "stages",
    "print each stage's declared reads, writes, params and KB settings",
    opt("--format", choices=["text", "markdown", "json"], default="text"),
)
def cmd_stages(args: argparse.Namespace) -> int:
    """The declared stage contracts, in registration (chain) order."""
    import json

    from rag_lab.pipeline.container import Services, default_plugins
    from rag_lab.pipeline.contracts import stage_table, stage_table_markdown

    plugins = default_plugins(Services())
    if args.format == "markdown":
        sys.stdout.write(stage_table_markdown(plugins))
    elif args.format == "json":
        print(json.dumps(stage_table(plugins), indent=2))
    else:
        for row in stage_table(plugins):
            print(f"{row['stage']} ({', '.join(row['events'])})")
            for key in ("reads", "writes", "params", "kb"):
                print(f"  {key:<7} {', '.join(row[key]) or '-'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``rag-lab`` parser with every command (their modules are imported here, not at import time)."""
    from rag_lab.commands.cache import CACHE_COMMAND
    from rag_lab.commands.evaluate import EVAL_COMMANDS
    from rag_lab.commands.judge import JUDGE_COMMAND
    from rag_lab.commands.runs import RUNS_COMMAND
    from rag_lab.commands.testset import cmd_testset
    from rag_lab.knowledge.reading import SUPPORTED_SUFFIXES
    from rag_lab.knowledge.tables import TABLE_SUFFIXES
    from rag_lab.lab.replay import cmd_replay
    from rag_lab.stream.serve_cli import cmd_serve

    kinds = ", ".join(sorted({*SUPPORTED_SUFFIXES, *TABLE_SUFFIXES}))
    ingest = dataclasses.replace(cmd_ingest, help=f"ingest a file or folder ({kinds}) into a knowledge base")
    return command_parser(
        __doc__,
        *(cmd_stages, ingest, cmd_ask, cmd_reindex),
        *EVAL_COMMANDS,
        *(cmd_replay, cmd_serve, JUDGE_COMMAND, CACHE_COMMAND, cmd_testset, RUNS_COMMAND),
    )


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
