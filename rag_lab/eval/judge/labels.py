"""The human labels file of ``rag-lab judge calibrate``: JSONL, one label per line.

=============  ========  ==========================================================================
field          required  meaning
=============  ========  ==========================================================================
``qid``        yes       the question id (as in the dataset's ``queries.jsonl`` and the report)
``metric``     yes       the judge metric the label grades: ``faithfulness``, ``answer_relevancy``
                         or ``llm_context_precision``
``label``      yes       the person's grade, an integer ``0 .. levels-1`` (binary: 0 no, 1 yes)
``labeller``   yes       who gave it (a name or handle)
``levels``     no        grades on the scale, default 2 (binary); the same on every line of a metric
``suite``      no        the report suite the question belongs to (needed only when its qid is in
                         several suites)
``labelled_at`` no       when (free text, ISO 8601 recommended)
``note``       no        free text
=============  ========  ==========================================================================

Several labellers may label the same question: each label is one pair (judge, person). The same
labeller labelling the same question and metric twice is an error. Blank lines are skipped; any
other problem is a :class:`LabelsError` naming the file, line, field and value.

>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "labels.jsonl"
>>> _ = p.write_text('{"qid": "q1", "metric": "faithfulness", "label": 2, "labeller": "ana"}\\n')
>>> try:
...     read_labels(p)
... except LabelsError as exc:
...     print(str(exc).replace(str(p), "labels.jsonl"))
labels.jsonl:1: field 'label': 2 is not a grade 0..1 (levels 2; binary labels are 0 or 1)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_lab.eval.ragas_adapter.samples import LLM_METRICS

__all__ = ["HumanLabel", "LabelsError", "labels_digest", "read_labels"]

_REQUIRED = ("qid", "metric", "label", "labeller")
_OPTIONAL = ("levels", "suite", "labelled_at", "note")


class LabelsError(ValueError):
    """A labels file is missing or a line breaks the format."""


@dataclass(frozen=True, slots=True)
class HumanLabel:
    qid: str
    metric: str
    label: int
    labeller: str
    levels: int = 2
    suite: str = ""
    labelled_at: str = ""
    note: str = ""
    line: int = 0  # where it came from (1-based)

    @property
    def normalised(self) -> float:
        """The grade on [0, 1] (``label / (levels - 1)``), the judge's scale."""
        return self.label / (self.levels - 1)


def _err(path: Path, line: int, field: str, value: object, what: str) -> LabelsError:
    return LabelsError(f"{path}:{line}: field {field!r}: {value!r} {what}")


def _text(path: Path, n: int, obj: Mapping[str, object], name: str, required: bool) -> str:
    v = obj.get(name, "")
    if not isinstance(v, str) or (required and not v.strip()):
        raise _err(path, n, name, v, "is not a non-empty string" if required else "is not a string")
    return v


def _parse(path: Path, n: int, obj: object) -> HumanLabel:
    if not isinstance(obj, dict):
        raise LabelsError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
    missing = [f for f in _REQUIRED if f not in obj]
    if missing:
        raise LabelsError(f"{path}:{n}: missing required field(s) {', '.join(map(repr, missing))}")
    unknown = sorted(set(obj) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        allowed = ", ".join((*_REQUIRED, *_OPTIONAL))
        raise _err(path, n, unknown[0], obj[unknown[0]], f"is an unknown field (allowed: {allowed})")
    metric = obj["metric"]
    if metric not in LLM_METRICS:
        raise _err(path, n, "metric", metric, f"is not a judge metric ({', '.join(LLM_METRICS)})")
    levels = obj.get("levels", 2)
    if isinstance(levels, bool) or not isinstance(levels, int) or levels < 2:
        raise _err(path, n, "levels", levels, "is not an integer >= 2 (the number of grades)")
    label = obj["label"]
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < levels:
        hint = "; binary labels are 0 or 1" if levels == 2 else ""
        raise _err(path, n, "label", label, f"is not a grade 0..{levels - 1} (levels {levels}{hint})")
    return HumanLabel(
        qid=_text(path, n, obj, "qid", True),
        metric=metric,
        label=label,
        labeller=_text(path, n, obj, "labeller", True),
        levels=levels,
        suite=_text(path, n, obj, "suite", False),
        labelled_at=_text(path, n, obj, "labelled_at", False),
        note=_text(path, n, obj, "note", False),
        line=n,
    )


def read_labels(path: str | Path) -> list[HumanLabel]:
    """Every label of a labels file, checked (see the module docstring)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise LabelsError(f"{p}: labels file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{p}: cannot read the labels file: {exc}") from None
    out: list[HumanLabel] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    levels: dict[str, tuple[int, int]] = {}  # metric -> (levels, first line)
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise LabelsError(f"{p}:{n}: not valid JSON: {exc}") from None
        lab = _parse(p, n, obj)
        key = (lab.suite, lab.qid, lab.metric, lab.labeller)
        if key in seen:
            raise LabelsError(
                f"{p}:{n}: labeller {lab.labeller!r} already labelled question {lab.qid!r} on {lab.metric} "
                f"(line {seen[key]})"
            )
        seen[key] = n
        first = levels.setdefault(lab.metric, (lab.levels, n))
        if first[0] != lab.levels:
            raise _err(p, n, "levels", lab.levels, f"differs from line {first[1]}'s {first[0]} for {lab.metric}")
        out.append(lab)
    if not out:
        raise LabelsError(f"{p}: no labels (the file is empty)")
    return out


def labels_digest(path: str | Path) -> str:
    """SHA-256 (16 hex) of the labels file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
