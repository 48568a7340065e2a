"""``rag-lab testset --kb KB --n N --out DIR [--seed S] [--generator auto|offline|llm]``: a
generated test set for your own KB.

``--generator auto`` (the default) picks ``llm`` when a chat model is at hand — ``--model`` and
``--base-url`` given, or the lab config's ``models.chat`` is a model that follows instructions
(an OpenAI-compatible endpoint) — and ``offline`` otherwise (the extractive answerer of the
default config cannot write questions). A set generated with ragas elsewhere comes in through
``rag-lab convert ragas``: ragas' generator counts tokens with tiktoken, whose tables are
downloaded on first use, so rag_lab does not run it."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TypedDict

from rag_lab.cliutil import command, flag, group, opt
from rag_lab.commands import lab_from

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

__all__ = ["choose_generator", "cmd_testset"]


class _BuildOptions(TypedDict):
    """The options both generators take."""

    seed: int
    depth: int
    overwrite: bool
    multihop: float


def choose_generator(args: argparse.Namespace, lab: Lab) -> tuple[str, Any]:
    """``(generator, chat model or None)`` for the command line (module docstring)."""
    from rag_lab.eval.testset.llm import model_from_options

    given = bool(args.model or args.base_url)
    if given and not (args.model and args.base_url):
        raise ValueError("--model and --base-url go together (an OpenAI-compatible endpoint)")
    if args.generator == "offline":
        if given:
            raise ValueError("--generator offline uses no model; drop --model/--base-url")
        return "offline", None
    if given:
        return "llm", model_from_options(args.model, args.base_url, args.api_key_env, args.timeout)
    lab_model = getattr(lab, "chat_model", None)
    if getattr(lab_model, "follows_instructions", False):
        return "llm", lab_model
    if args.generator == "llm":
        raise ValueError(
            "--generator llm needs a chat model: give --model and --base-url, or set models.chat "
            "in the lab config to an OpenAI-compatible endpoint (type: openai)"
        )
    return "offline", None


@command(
    "testset",
    "generate questions with known gold from a KB's chunks (a chat model when configured, else offline)",
    opt("--kb", "knowledge base name", required=True),
    opt("--n", "number of questions to keep", type=int),
    opt(
        "--from-file",
        "questions people asked (.txt one a line, .csv question column, .jsonl / .json) instead of generated "
        "ones: gold guessed from the KB's search, every question unreviewed until labelled",
        metavar="FILE",
    ),
    flag(
        "--from-sessions",
        "questions asked in the lab's sessions instead of generated ones: gold guessed from the passages "
        "their answers cited, earlier turns kept as history, every question unreviewed until labelled",
    ),
    opt("--out", "output dataset folder (corpus.jsonl, queries.jsonl)", required=True),
    opt("--seed", type=int, default=0),
    opt(
        "--depth",
        "findable: a plain BM25 over the KB's documents ranks each gold document in its top DEPTH (default 50); "
        "with --from-file, the KB search's depth the gold is guessed from (default 10)",
        type=int,
    ),
    opt(
        "--multihop",
        "share of two-document questions: offline, bridge and comparison questions; with a chat model, "
        "questions over two graph-linked chunks",
        type=float,
        default=0.25,
    ),
    flag("--overwrite"),
    opt(
        "--generator",
        "auto: llm when --model/--base-url or the lab's models.chat can follow instructions, else offline "
        "(a set generated with ragas: rag-lab convert ragas)",
        choices=("auto", "offline", "llm"),
        default="auto",
    ),
    group(
        "chat model (--generator llm)",
        opt("--model", "model name at an OpenAI-compatible endpoint"),
        opt("--base-url", "the endpoint, e.g. http://127.0.0.1:8080/v1"),
        opt("--api-key-env", "environment variable holding the API key"),
        opt("--timeout", "seconds per model call", type=float, default=60.0),
        opt("--retries", "retries of a failed model call (then an error)", type=int, default=1),
        opt("--concurrency", "model calls at once", type=int, default=4),
    ),
)
def cmd_testset(args: argparse.Namespace) -> int:
    from rag_lab.eval.testset.answerable import FINDABLE_DEPTH
    from rag_lab.eval.testset.build import LLM_NOTE, REPORT_FILE, WEAKER_NOTE, build_testset
    from rag_lab.eval.testset.llm_build import build_llm_testset

    lab = lab_from(args)
    guessed = "the gold of each question is a guess from {} (gold_candidates in its metadata); label them in the "
    guessed += "labelling panel before a baseline is built on them"
    if args.from_sessions:
        from rag_lab.eval.testset.from_sessions import build_from_sessions

        if args.n is not None or args.from_file:
            raise ValueError("--from-sessions takes every question asked: leave out --n and --from-file")
        ds, report = build_from_sessions(lab, args.kb, args.out, overwrite=args.overwrite)
        note = guessed.format("the passages its answer cited")
    elif args.from_file:
        from rag_lab.eval.testset.from_file import build_from_file

        if args.n is not None:
            raise ValueError("--from-file takes every question of the file: leave out --n")
        depth = 10 if args.depth is None else args.depth
        ds, report = build_from_file(lab, args.kb, args.from_file, args.out, depth=depth, overwrite=args.overwrite)
        note = guessed.format("the KB's search")
    else:
        if args.n is None:
            raise ValueError("--n N: the number of questions to generate (or --from-file FILE)")
        generator, model = choose_generator(args, lab)
        depth = FINDABLE_DEPTH if args.depth is None else args.depth
        common = _BuildOptions(seed=args.seed, depth=depth, overwrite=args.overwrite, multihop=args.multihop)
        if generator == "llm":
            ds, report = build_llm_testset(
                lab,
                args.kb,
                args.n,
                args.out,
                model,
                timeout=args.timeout,
                retries=args.retries,
                concurrency=args.concurrency,
                **common,
            )
            note = LLM_NOTE
        else:
            ds, report = build_testset(lab, args.kb, args.n, args.out, **common)
            note = WEAKER_NOTE
    print(report)
    print(f"wrote {ds.path}: {len(ds.corpus)} documents, {len(ds.queries)} questions, {REPORT_FILE}")
    print(f"note: {note}", file=sys.stderr)
    if not (args.from_sessions or args.from_file):
        print(
            f"next: rag-lab eval --dataset {ds.path} (its saturation line: how many questions the pipeline already "
            "gets right)",
            file=sys.stderr,
        )
    return 0
