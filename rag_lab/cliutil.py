"""The shape every ``rag-lab`` entry point shares: global options, one sub-command, errors as exit 2.

``rag-lab`` (:mod:`rag_lab.cli`) registers every command; ``python -m rag_lab.eval.cli`` and
``python -m rag_lab.stream.serve_cli`` build the same parser with only their own commands, so the
sub-command modules never import the top-level CLI (one-way layers, ``tests/test_import_layers.py``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

PROG = "rag-lab"

#: a function that adds sub-commands to the sub-parsers action
AddCommands = Callable[[Any], object]


def command_parser(description: str | None, *add_commands: AddCommands) -> argparse.ArgumentParser:
    """``rag-lab [--config YAML] [--workspace DIR] COMMAND …`` with the given commands."""
    ap = argparse.ArgumentParser(prog=PROG, description=description)
    ap.add_argument("--config", default=None, help="lab YAML (default: config/lab.yaml)")
    ap.add_argument("--workspace", default=None, help="override the workspace folder")
    sub = ap.add_subparsers(dest="command", required=True)
    for add in add_commands:
        add(sub)
    return ap


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; a ValueError / LookupError is printed as
    ``rag-lab COMMAND: message`` and exits 2."""
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        return int(args.func(args) or 0)
    except (ValueError, LookupError) as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 2
