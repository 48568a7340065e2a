"""The workspace's run history: every ``rag-lab eval`` is recorded in ``<workspace>/runs.jsonl``
(id, time, report path, kind, suites with their dataset digests and question counts, effective
params, models, code version, suite means, tags), so runs can be listed, tagged and compared.

:func:`compare_runs` lays N runs side by side — their means (the report's metrics and the funnel's
stage metrics) and the params that differ — and, for two runs, the gate's paired per-question
comparison (:func:`rag_lab.eval.gate.compare_reports`: intervals, verdicts, changed questions). Runs
are comparable only over the same questions and documents: the suites must be the same and each
suite's dataset digest equal (:func:`rag_lab.eval.gate.provenance.dataset_digest`), else
:class:`RunsError` says which suite differs and how.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rag_lab.eval.gate import GatePolicy, GateResult
    from rag_lab.eval.report import EvalReport

__all__ = ["RUNS_FILE", "RunEntry", "RunsError", "compare_runs", "load_runs", "record_run", "tag_run"]

RUNS_FILE = "runs.jsonl"
#: the means shown side by side (those a report has), then the funnel's stage metrics
SHOWN = ("ndcg@10", "recall@5", "recall@10", "mrr", "map", "hit@1")
STAGE_SHOWN = ("vector.ndcg@10", "keyword.ndcg@10", "fused.recall@10", "rerank.recall@10", "final.ndcg@10")


class RunsError(ValueError):
    """Runs that cannot be found or compared (the message says which and why)."""


@dataclass
class RunEntry:
    id: str
    time: str
    kind: str
    report: str
    suites: dict[str, dict[str, object]]  # suite -> {"dataset", "digest", "n_queries"}
    params: dict[str, object]
    models: dict[str, str] = field(default_factory=dict)
    code_version: str = ""
    means: dict[str, dict[str, float]] = field(default_factory=dict)  # suite -> metric -> mean
    tags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "time": self.time,
            "kind": self.kind,
            "report": self.report,
            "suites": self.suites,
            "params": self.params,
            "models": self.models,
            "code_version": self.code_version,
            "means": {s: {k: (v if math.isfinite(v) else None) for k, v in m.items()} for s, m in self.means.items()},
            "tags": self.tags,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunEntry:
        means = {s: {k: math.nan if v is None else float(v) for k, v in m.items()} for s, m in d["means"].items()}
        return cls(
            str(d["id"]),
            str(d["time"]),
            str(d["kind"]),
            str(d["report"]),
            dict(d["suites"]),
            dict(d["params"]),
            dict(d.get("models") or {}),
            str(d.get("code_version") or ""),
            means,
            list(d.get("tags") or []),
        )

    def line(self) -> str:
        suites = ", ".join(f"{s} ({v['n_queries']} q)" for s, v in self.suites.items())
        first = next(iter(self.means.values()), {})
        head = " ".join(f"{m} {first[m]:.4f}" for m in SHOWN[:2] if m in first and math.isfinite(first[m]))
        tags = f" [{', '.join(self.tags)}]" if self.tags else ""
        return f"{self.id}  {self.time[:19]}  {self.kind}  {suites}  {head}{tags}"


def _path(root: str | Path) -> Path:
    return Path(root) / RUNS_FILE


def load_runs(root: str | Path) -> list[RunEntry]:
    """Every recorded run of the workspace, oldest first (none when the file is absent)."""
    p = _path(root)
    if not p.exists():
        return []
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(RunEntry.from_dict(json.loads(line)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise RunsError(f"{p}:{n}: not a run record ({exc})") from None
    return out


def _write(root: str | Path, entries: Iterable[RunEntry]) -> None:
    p = _path(root)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".runs-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps(e.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    os.replace(tmp, p)


def record_run(root: str | Path, report: EvalReport, report_path: str | Path, kind: str = "eval") -> RunEntry:
    """Append an evaluation report (written at ``report_path``) to the workspace's history."""
    meta = report.meta or {}
    prov = meta.get("provenance") or {}
    digests = prov.get("datasets") or {}
    when = str(meta.get("created_at") or datetime.datetime.now(datetime.UTC).isoformat())
    path = str(Path(report_path).resolve())
    lab_params = dict(meta.get("lab_params") or {})
    entry = RunEntry(
        id=hashlib.sha256(f"{path}|{when}".encode()).hexdigest()[:8],
        time=when,
        kind=kind,
        report=path,
        suites={
            s.name: {"dataset": s.dataset, "digest": str(digests.get(s.name, "")), "n_queries": len(s.records)}
            for s in report.suites
        },
        params={**lab_params, **{k: v for s in report.suites for k, v in (s.params or {}).items()}},
        models={str(k): str(v) for k, v in (prov.get("models") or {}).items()},
        code_version=str(prov.get("code_version") or ""),
        means={s.name: {k: float(v) for k, v in s.summary().items()} for s in report.suites},
    )
    p = _path(root)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    return entry


def find_run(entries: Sequence[RunEntry], ref: str) -> RunEntry:
    """The run whose id starts with ``ref``, or the latest one tagged ``ref``."""
    hits = [e for e in entries if e.id.startswith(ref)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise RunsError(f"run {ref!r} is ambiguous: {', '.join(e.id for e in hits)}")
    tagged = [e for e in entries if ref in e.tags]
    if tagged:
        return tagged[-1]
    raise RunsError(f"no run {ref!r} (ids and tags: rag-lab runs list)")


def tag_run(root: str | Path, ref: str, tag: str) -> RunEntry:
    """Add ``tag`` to a run (a tag names one run: it moves from any run that had it)."""
    if not tag or any(c.isspace() for c in tag):
        raise RunsError(f"tag {tag!r}: one word, no spaces")
    entries = load_runs(root)
    target = find_run(entries, ref)
    for e in entries:
        if tag in e.tags and e is not target:
            e.tags.remove(tag)
    if tag not in target.tags:
        target.tags.append(tag)
    _write(root, entries)
    return target


def _comparable(runs: Sequence[RunEntry]) -> None:
    first = runs[0]
    for other in runs[1:]:
        if set(other.suites) != set(first.suites):
            raise RunsError(
                f"runs {first.id} and {other.id} cover other suites ({', '.join(sorted(first.suites))} vs "
                f"{', '.join(sorted(other.suites))}): compare runs over the same questions"
            )
        for name, s in first.suites.items():
            o = other.suites[name]
            if s["n_queries"] != o["n_queries"] or (s["digest"] and o["digest"] and s["digest"] != o["digest"]):
                raise RunsError(
                    f"suite {name!r} differs between runs {first.id} and {other.id}: {s['n_queries']} vs "
                    f"{o['n_queries']} questions, dataset digest {s['digest'] or '?'} vs {o['digest'] or '?'} "
                    "(other questions, gold or documents): the runs are not comparable"
                )


@dataclass
class Comparison:
    runs: list[RunEntry]
    rows: list[tuple[str, str, list[float]]]  # (suite, metric, value per run)
    params: dict[str, list[object]]  # params that differ: name -> value per run
    gate: GateResult | None = None  # the paired comparison of two runs

    def table(self) -> str:
        head = ["suite", "metric", *[r.id for r in self.runs]]
        rows = [head] + [[s, m, *(f"{v:.4f}" if math.isfinite(v) else "—" for v in vals)] for s, m, vals in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if self.params:
            lines.append(
                "params that differ: " + "; ".join(f"{k} " + " / ".join(map(repr, v)) for k, v in self.params.items())
            )
        else:
            lines.append("params: the same in every run")
        return "\n".join(lines)

    def frame(self) -> pd.DataFrame:
        """The side-by-side means as a pandas DataFrame (a notebook shows it as a table)."""
        import pandas as pd

        return pd.DataFrame(
            [[s, m, *vals] for s, m, vals in self.rows], columns=["suite", "metric", *[r.id for r in self.runs]]
        )


def compare_runs(root: str | Path, refs: Sequence[str], policy: GatePolicy | None = None) -> Comparison:
    """Runs ``refs`` (ids, prefixes or tags) side by side; two runs also get the gate's paired
    comparison (``policy``: a :class:`~rag_lab.eval.gate.GatePolicy`)."""
    if len(refs) < 2:
        raise RunsError("compare needs two runs or more")
    entries = load_runs(root)
    runs = [find_run(entries, r) for r in refs]
    _comparable(runs)
    rows: list[tuple[str, str, list[float]]] = []
    for suite in runs[0].suites:
        names = [m for m in (*SHOWN, *STAGE_SHOWN) if any(m in r.means.get(suite, {}) for r in runs)]
        names += sorted(
            {m for r in runs for m in r.means.get(suite, {})} - set(names) - _other_funnel_metrics(runs, suite)
        )
        rows += [(suite, m, [r.means.get(suite, {}).get(m, math.nan) for r in runs]) for m in names]
    keys = sorted({k for r in runs for k in r.params})
    params = {k: [r.params.get(k) for r in runs] for k in keys if len({json.dumps(r.params.get(k)) for r in runs}) > 1}
    gate = None
    if len(runs) == 2:
        from rag_lab.eval.gate import GatePolicy, compare_reports
        from rag_lab.eval.report import load_report

        gate = compare_reports(load_report(runs[0].report), load_report(runs[1].report), policy or GatePolicy())
    return Comparison(runs, rows, params, gate)


def _other_funnel_metrics(runs: Sequence[RunEntry], suite: str) -> set[str]:
    """The funnel metrics not in :data:`STAGE_SHOWN` (the table stays readable; reports hold them all)."""
    from rag_lab.eval.funnel import parse_funnel_metric

    return {m for r in runs for m in r.means.get(suite, {}) if parse_funnel_metric(m) is not None} - set(STAGE_SHOWN)
