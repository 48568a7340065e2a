"""The command line of ``scripts/convert_datasets.py``: every bundled-dataset converter by name
(:mod:`rag_lab.eval.datasets.bundled` and the gate slices of
:mod:`rag_lab.eval.datasets.bundled_hard`), written with :func:`~rag_lab.eval.datasets.raw.write_converted`."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rag_lab.cliutil import many, opt, plain_parser
from rag_lab.eval.datasets.bundled import convert_cmrc2018, convert_hotpotqa, convert_pubmedqa
from rag_lab.eval.datasets.bundled_hard import HARD_CONVERTERS
from rag_lab.eval.datasets.raw import ConversionError, Converted, write_converted

# --------------------------------------------------------------------------- writing

CONVERTERS: dict[str, Callable[[Path], Converted]] = {
    "cmrc2018": convert_cmrc2018,
    "hotpotqa_hipporag100": convert_hotpotqa,
    "pubmedqa_pqal": convert_pubmedqa,
}
CONVERTERS.update(HARD_CONVERTERS)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = plain_parser(
        None,
        "Convert the raw third-party QA datasets into rag_lab's format.",
        opt("--raw", "raw datasets folder", type=Path, default=Path("../shared/datasets-raw")),
        opt("--out", "output folder", type=Path, default=Path("datasets")),
        many("--only", "convert only NAME (repeatable)", choices=sorted(CONVERTERS)),
    )
    args = parser.parse_args(argv)
    if not args.raw.is_dir():
        parser.error(f"--raw {args.raw}: not a folder")
    for name in args.only or list(CONVERTERS):
        try:
            conv = CONVERTERS[name](args.raw)
            sizes = write_converted(conv, args.out)
        except ConversionError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(
            f"{name}: {len(conv.corpus)} docs, {len(conv.queries)} queries, "
            f"{sum(sizes.values()):,} bytes -> {args.out / name}"
        )
    return 0
