"""Shared parts of the bundled-dataset converters: checked reads of raw third-party files (sha256
recorded upstream), the :class:`Converted` result, PROVENANCE.md and writing a converted folder."""

from __future__ import annotations

import hashlib
import json
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets.converters import jsonl_bytes

CC_BY_SA_FILE = ("cmrc2018", "UPSTREAM_LICENCE.txt")
CC_BY_SA_FIRST_LINE = "Attribution-ShareAlike 4.0 International"
SIZE_LIMIT_BYTES = 3 * 1024 * 1024


class ConversionError(RuntimeError):
    """A raw input is missing, altered or not shaped as expected."""


@dataclass
class Converted:
    """The rows and documentation of one converted dataset."""

    name: str
    corpus: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    license_text: str
    provenance_head: str
    conversion_notes: list[str]
    stats: list[tuple[str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- helpers


def read_checked(raw: Path, rel: str, expected_sha256: str) -> bytes:
    """Read ``raw/rel`` and fail unless its sha256 equals the one recorded upstream."""
    path = raw / rel
    if not path.is_file():
        raise ConversionError(f"{path}: raw input not found")
    data = path.read_bytes()
    got = hashlib.sha256(data).hexdigest()
    if got != expected_sha256:
        raise ConversionError(f"{path}: sha256 {got} differs from the recorded {expected_sha256}")
    return data


def load_json(raw: Path, rel: str, expected_sha256: str) -> Any:
    """Parse a checked raw JSON file."""
    return json.loads(read_checked(raw, rel, expected_sha256).decode("utf-8"))


def cc_by_sa_text(raw: Path) -> str:
    """The full CC BY-SA 4.0 legal code, taken from the CMRC 2018 repository's LICENCE copy."""
    path = raw.joinpath(*CC_BY_SA_FILE)
    if not path.is_file():
        raise ConversionError(f"{path}: CC BY-SA 4.0 text not found (needed for the LICENSE files)")
    text = path.read_text(encoding="utf-8")
    if text.splitlines()[0].strip() != CC_BY_SA_FIRST_LINE:
        raise ConversionError(f"{path}: line 1 is not {CC_BY_SA_FIRST_LINE!r}")
    return text


def dedupe_keep_order(items: Sequence[str]) -> list[str]:
    """Remove repeated strings, keeping the first occurrence."""
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]  # type: ignore[func-returns-value]


def norm_title(title: str) -> str:
    """Title key used when an exact title lookup fails: NFC, collapsed whitespace, casefold."""
    return " ".join(unicodedata.normalize("NFC", title).split()).casefold()


def length_stats(texts: Sequence[str]) -> str:
    """``min / median / max`` character lengths."""
    lens = [len(t) for t in texts]
    return f"{min(lens):,} / {int(statistics.median(lens)):,} / {max(lens):,}"


def provenance_text(conv: Converted, files: dict[str, bytes]) -> str:
    """The PROVENANCE.md of a converted dataset (deterministic: no dates)."""
    n_gold = [len(q["gold_ids"]) for q in conv.queries]
    lines = [conv.provenance_head, "## Conversion", ""]
    lines.append(
        "Made by `scripts/convert_datasets.py` (deterministic: re-running it gives the same bytes). "
        "Texts are copied verbatim; only the layout changes. Format: `datasets/README.md`."
    )
    lines.append("")
    lines.extend(f"- {note}" for note in conv.conversion_notes)
    lines += ["", "## Counts", "", "| item | value |", "|---|---|"]
    rows = [
        ("corpus documents", f"{len(conv.corpus):,}"),
        ("queries", f"{len(conv.queries):,}"),
        ("gold ids per query (min / max)", f"{min(n_gold)} / {max(n_gold)}"),
        ("document length, chars (min / median / max)", length_stats([d["text"] for d in conv.corpus])),
        ("question length, chars (min / median / max)", length_stats([q["question"] for q in conv.queries])),
        *conv.stats,
    ]
    lines.extend(f"| {k} | {v} |" for k, v in rows)
    lines += ["", "## Files", "", "| file | bytes | sha256 |", "|---|---|---|"]
    lines.extend(f"| {name} | {len(data):,} | `{hashlib.sha256(data).hexdigest()}` |" for name, data in files.items())
    lines.append(f"| total (without this file) | {sum(len(d) for d in files.values()):,} | |")
    return "\n".join(lines) + "\n"


def write_converted(conv: Converted, out: Path) -> dict[str, int]:
    """Write one converted dataset under ``out/<name>/``; return file sizes."""
    files = {
        "corpus.jsonl": jsonl_bytes(conv.corpus),
        "queries.jsonl": jsonl_bytes(conv.queries),
        "LICENSE": conv.license_text.encode("utf-8"),
    }
    files["PROVENANCE.md"] = provenance_text(conv, files).encode("utf-8")
    total = sum(len(d) for d in files.values())
    if total > SIZE_LIMIT_BYTES:
        raise ConversionError(f"{conv.name}: {total:,} bytes, over the {SIZE_LIMIT_BYTES:,}-byte budget")
    folder = out / conv.name
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return {name: len(data) for name, data in files.items()}
