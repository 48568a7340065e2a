"""The shape every ``rag-lab`` entry point shares: global options, one sub-command, errors as exit 2,
and the table the commands are declared in.

A command is data: :func:`command` turns a function ``(args) -> exit code`` into a
:class:`Command` with its name, help line and options (:func:`opt`, :func:`flag`, :func:`many`,
:func:`group`: ``add_argument`` calls kept as data, so an option group several commands share is
declared once). :func:`command_parser` builds the argparse parser of any set of commands: ``rag-lab``
(:mod:`rag_lab.cli`) takes every one; ``python -m rag_lab.commands.evaluate`` and
``python -m rag_lab.stream.serve_cli`` take only their own, so the sub-command modules never
import the top-level CLI (one-way layers, ``tests/test_import_layers.py``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

PROG = "rag-lab"
_N = TypeVar("_N", int, float)

#: a command's body: the parsed arguments in, the exit code out
Run = Callable[[argparse.Namespace], int]
#: one ``add_argument`` declaration as data: given a parser (or a group of one), it adds itself
Arg = Callable[[argparse._ActionsContainer], object]


def opt(name: str, help: str | None = None, **kw: Any) -> Arg:
    """An option (``--name``) or a positional argument (``name``) with ``add_argument``'s keywords."""
    return lambda parser: parser.add_argument(name, help=help, **kw)


def flag(name: str, help: str | None = None) -> Arg:
    """An on/off switch (``store_true``)."""
    return opt(name, help, action="store_true")


def many(name: str, help: str | None = None, **kw: Any) -> Arg:
    """A repeatable option: its values collected in a list (None when not given)."""
    return opt(name, help, action="append", **kw)


def group(title: str, *args: Arg) -> Arg:
    """Options shown under a titled section of the help."""

    def add(parser: argparse._ActionsContainer) -> None:
        g = parser.add_argument_group(title)
        for a in args:
            a(g)

    return add


#: ``--quiet``: no progress output
QUIET = flag("--quiet")


@dataclass(frozen=True)
class Command:
    """A sub-command: name, help line, options and body — or sub-commands of its own
    (``rag-lab cache stats``)."""

    name: str
    help: str
    args: tuple[Arg, ...] = ()
    run: Run | None = None
    subcommands: tuple[Command, ...] = ()
    description: str | None = None

    def add_to(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
        """Register on an argparse sub-parsers object; returns the command's parser."""
        p: argparse.ArgumentParser = subparsers.add_parser(self.name, help=self.help, description=self.description)
        for a in self.args:
            a(p)
        if self.subcommands:
            sub = p.add_subparsers(dest=f"{self.name}_command", required=True)
            for c in self.subcommands:
                c.add_to(sub)
        p.set_defaults(func=self.run)
        return p


def command(name: str, help: str, *args: Arg, description: str | None = None) -> Callable[[Run], Command]:
    """Decorator: the function becomes the body of the :class:`Command` ``name``."""
    return lambda run: Command(name, help, args, run, description=description)


def plain_parser(prog: str | None, description: str | None, *args: Arg) -> argparse.ArgumentParser:
    """A parser with the given options (and no sub-commands of its own)."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    for a in args:
        a(ap)
    return ap


def command_parser(description: str | None, *commands: Command) -> argparse.ArgumentParser:
    """``rag-lab [--config YAML] [--workspace DIR] COMMAND …`` with the given commands."""
    ap = plain_parser(
        PROG,
        description,
        opt("--config", "lab YAML (default: config/lab.yaml)"),
        opt("--workspace", "override the workspace folder"),
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for c in commands:
        c.add_to(sub)
    return ap


def param_overrides(items: Sequence[str] | None, check: bool = True) -> dict[str, object]:
    """``--param FIELD=VALUE`` items (YAML values), with ``check`` validated as PipelineParams
    fields (a bad name or value raises ValueError naming it)."""
    import yaml

    from rag_lab.types.params import PipelineParams

    out: dict[str, object] = {}
    for kv in items or []:
        if "=" not in kv:
            raise ValueError(f"--param {kv!r}: expected FIELD=VALUE")
        key, value = kv.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    if out and check:
        PipelineParams.from_mapping(out, source="--param")
    return out


#: exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)
INTERRUPTED_EXIT = 130


@contextmanager
def first_ctrl_c_stops() -> Iterator[None]:
    """While a command runs: the first Ctrl-C raises ``KeyboardInterrupt`` at once, wherever the
    main thread is — also in synchronous work inside a coroutine, where asyncio's own handler only
    cancels the main task at its next ``await`` (an ingest inside ``rag-lab eval`` went on for
    minutes). Later presses do not interrupt the clean-up it triggers (half-written documents are
    removed, finished ones kept); a third one exits at once. Only in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    presses = 0

    def handler(_signum: int, _frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            raise KeyboardInterrupt
        if presses == 2:
            print(f"{PROG}: stopping — cleaning up what was half-written (Ctrl-C again to quit now)", file=sys.stderr)
        else:
            os._exit(INTERRUPTED_EXIT)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def check_file_stem(name: str, option: str = "--name") -> str:
    """``name`` when it is a plain file name stem, which output writers put under their ``--out``
    folder; otherwise :class:`ValueError` naming ``option`` and the value. Refused: empty names,
    path separators (``/``, ``\\``), ``..``, a leading ``.`` or ``~``, NUL and other control
    characters, so ``--name ../../x`` can never write outside ``--out``."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{option} {name!r}: a report name must be a non-empty file name")
    bad = (
        "a path separator"
        if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name)
        else "'..'"
        if ".." in name
        else "a leading '.' or '~'"
        if name[0] in ".~"
        else "a control character"
        if any(ord(c) < 32 or ord(c) == 127 for c in name)
        else ""
    )
    if bad:
        raise ValueError(
            f"{option} {name!r:.80}: a report name is a file name, not a path (it holds {bad}); "
            "choose the folder with --out"
        )
    return name


def number_arg(convert: Callable[[str], _N], ok: Callable[[_N], bool], rule: str) -> Callable[[str], _N]:
    """An argparse ``type=`` for a number (``convert``: ``int`` or ``float``) that ``ok`` accepts;
    a refused value is named with ``rule`` (``">= 1"``)."""

    def parse(text: str) -> _N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if convert is int else 'a number'}"
            ) from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text} must be {rule}")
        return value

    return parse


def file_stem_arg(option: str = "--name") -> Callable[[str], str]:
    """An argparse ``type=`` that checks a ``--name`` with :func:`check_file_stem`."""

    def parse(value: str) -> str:
        try:
            return check_file_stem(value, option)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def check_config_file(path: str | None) -> None:
    """A ``--config`` file that is missing, not YAML or not a mapping is refused before any
    command runs (also commands that would not read it), naming the file."""
    if not path:
        return
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--config {path}: invalid YAML: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise ValueError(f"--config {path}: expected a mapping at the top level, got {type(data).__name__}")


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; a ValueError / LookupError is printed as
    ``rag-lab COMMAND: message`` and exits 2; Ctrl-C stops it with one line and exit code 130
    (what finished is kept: see :func:`first_ctrl_c_stops`)."""
    args = parser.parse_args(None if argv is None else list(argv))
    try:
        check_config_file(getattr(args, "config", None))
        with first_ctrl_c_stops():
            return int(args.func(args) or 0)
    except (ValueError, LookupError) as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted (Ctrl-C); what had finished is kept", file=sys.stderr)
        return INTERRUPTED_EXIT
