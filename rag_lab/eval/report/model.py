"""The evaluation report's data: :class:`SuiteResult` (one dataset evaluated with one config:
retrieval metrics, ragas results, per-question records), :class:`EvalReport` (suites plus run
metadata), their JSON form (NaN as null) and :func:`load_report`."""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import rag_lab
from rag_lab.eval.funnel import funnel_section
from rag_lab.eval.metrics import RetrievalReport
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report.schema import ReportError, validate_report_data

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rag_lab.eval.saturation import Saturation

REPORT_FORMAT = 1
FORMATS = ("md", "html", "json", "junit")


def _nan_to_none(v: float) -> float | None:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _none_to_nan(v: float | None) -> float:
    return math.nan if v is None else float(v)


class LedgerTotals(TypedDict):
    """A suite's model calls per kind, tokens and cost (:meth:`SuiteResult.ledger_totals`)."""

    model_calls: dict[str, int]
    tokens_in: int
    tokens_out: int
    cost_usd: float
    judge_failed: int


@dataclass
class SuiteResult:
    """One dataset evaluated with one config."""

    name: str
    dataset: str
    kb: str
    spec: dict[str, object]
    params: dict[str, object]
    retrieval: RetrievalReport
    records: list[QueryRecord]
    ragas: RagasResult | None = None
    seconds: float = 0.0

    # -- metric access ------------------------------------------------------------------------
    @property
    def qids(self) -> list[str]:
        return [r.qid for r in self.records]

    def metric_names(self) -> list[str]:
        """Retrieval, ragas, then gold-funnel metrics (:mod:`rag_lab.eval.funnel`; only when the
        records carry funnels)."""
        names = list(self.retrieval.metric_names)
        if self.ragas is not None:
            names += list(self.ragas.metrics)
        return names + list(self.funnel_values())

    def funnel_values(self) -> dict[str, dict[str, float]]:
        """``{funnel metric: {qid: value}}`` from the records' funnels (empty without them)."""
        from rag_lab.eval.funnel import funnel_values

        return funnel_values(self.records)

    def values(self) -> dict[str, dict[str, float]]:
        """``{metric: {qid: value}}`` for every metric (retrieval rows; ragas values, NaN kept;
        funnel values)."""
        out: dict[str, dict[str, float]] = {m: {} for m in self.metric_names()}
        for row in self.retrieval.rows:
            for m in self.retrieval.metric_names:
                out[m][str(row["qid"])] = float(row[m])
        if self.ragas is not None:
            for m in self.ragas.metrics:
                out[m] = dict(zip(self.ragas.qids, self.ragas.values[m]))
        out.update(self.funnel_values())
        return out

    def summary(self) -> dict[str, float]:
        from rag_lab.eval.funnel import funnel_summary

        s = dict(self.retrieval.summary())
        if self.ragas is not None:
            s.update(self.ragas.summary())
        s.update(funnel_summary(self.records))
        return s

    def saturation(self) -> dict[str, Saturation]:
        """Per metric (gold-funnel ones left out) the questions at its ceiling and floor
        (:mod:`rag_lab.eval.saturation`): ``{metric: Saturation}``."""
        from rag_lab.eval.report.funnel_render import is_funnel_metric
        from rag_lab.eval.saturation import saturation

        return saturation({m: v for m, v in self.values().items() if not is_funnel_metric(m)})

    def counts(self) -> dict[str, dict[str, int]]:
        n = self.retrieval.n_queries
        out = {m: {"n": n, "n_valid": n, "n_nan": 0, "n_failed": 0} for m in self.retrieval.metric_names}
        if self.ragas is not None:
            out.update(self.ragas.counts())
        for m, per in self.funnel_values().items():
            valid = sum(1 for v in per.values() if math.isfinite(v))
            out[m] = {"n": len(per), "n_valid": valid, "n_nan": len(per) - valid, "n_failed": 0}
        return out

    @property
    def mean_latency_ms(self) -> float:
        lat = [r.latency_ms for r in self.records if not r.error]
        return sum(lat) / len(lat) if lat else math.nan

    def ledger_totals(self) -> LedgerTotals:
        """Model calls per kind, tokens and cost summed over the questions, plus the LLM judge's
        calls (every attempt, kind ``judge``; ``judge_failed`` of them failed)."""
        calls: dict[str, int] = {}
        for r in self.records:
            for k, v in (r.model_calls or {}).items():
                calls[k] = calls.get(k, 0) + int(v)
        judge = (self.ragas.judge if self.ragas is not None else None) or {}
        if judge.get("calls"):
            calls["judge"] = calls.get("judge", 0) + int(judge["calls"])
        return {
            "model_calls": calls,
            "tokens_in": sum(r.tokens_in for r in self.records) + int(judge.get("tokens_in", 0)),
            "tokens_out": sum(r.tokens_out for r in self.records) + int(judge.get("tokens_out", 0)),
            "cost_usd": sum(r.cost_usd for r in self.records) + float(judge.get("cost_usd", 0.0)),
            "judge_failed": int(judge.get("failed", 0)),
        }

    @property
    def errors(self) -> int:
        return sum(1 for r in self.records if r.error)

    @property
    def fallbacks(self) -> int:
        return sum(1 for r in self.records if r.is_fallback)

    def per_query(self) -> pd.DataFrame:
        """One row per query: every metric, latency, error."""
        import pandas as pd

        vals = self.values()
        df = pd.DataFrame(
            {m: [vals[m].get(q, math.nan) for q in self.qids] for m in vals}, index=pd.Index(self.qids, name="qid")
        )
        df["latency_ms"] = [r.latency_ms for r in self.records]
        df["error"] = [r.error for r in self.records]
        return df

    # -- (de)serialisation ----------------------------------------------------------------------
    def to_dict(self, include_texts: bool = False) -> dict[str, object]:
        records = []
        for r in self.records:
            d = r.to_dict()
            if not include_texts:
                d.pop("contexts", None)
            records.append(d)
        return {
            "name": self.name,
            "dataset": self.dataset,
            "kb": self.kb,
            "spec": self.spec,
            "params": self.params,
            "seconds": round(self.seconds, 3),
            "summary": {k: _nan_to_none(v) for k, v in self.summary().items()},
            "counts": self.counts(),
            "saturation": {m: s.to_dict() for m, s in self.saturation().items()},
            "retrieval": {
                "ks": list(self.retrieval.ks),
                "rows": self.retrieval.rows,
                "excluded_queries": list(self.retrieval.excluded_queries),
            },
            "ragas": None
            if self.ragas is None
            else {
                **self.ragas.to_dict(),
                "values": {m: [_nan_to_none(v) for v in vs] for m, vs in self.ragas.values.items()},
                **(
                    {"repeats": {m: [[_nan_to_none(v) for v in r] for r in rs] for m, rs in self.ragas.repeats.items()}}
                    if self.ragas.repeats
                    else {}
                ),
            },
            "records": records,
            **({"funnel": funnel} if (funnel := funnel_section(self.records)) is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteResult:
        rt = d["retrieval"]
        rag = d.get("ragas")
        ragas = None
        if rag:
            rag = dict(rag)
            rag["values"] = {m: [_none_to_nan(v) for v in vs] for m, vs in rag["values"].items()}
            if rag.get("repeats"):
                rag["repeats"] = {m: [[_none_to_nan(v) for v in r] for r in rs] for m, rs in rag["repeats"].items()}
            ragas = RagasResult.from_dict(rag)
        return cls(
            name=d["name"],
            dataset=d["dataset"],
            kb=d.get("kb", ""),
            spec=dict(d.get("spec") or {}),
            params=dict(d.get("params") or {}),
            retrieval=RetrievalReport(
                ks=tuple(rt["ks"]),
                rows=[dict(r) for r in rt["rows"]],
                excluded_queries=list(rt.get("excluded_queries") or []),
            ),
            records=[QueryRecord.from_dict(r) for r in d.get("records") or []],
            ragas=ragas,
            seconds=float(d.get("seconds") or 0.0),
        )


@dataclass
class EvalReport:
    """Suites plus run metadata (versions, config, the spec that produced it)."""

    suites: list[SuiteResult]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.meta.setdefault("created_at", _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
        self.meta.setdefault("rag_lab", rag_lab.__version__)
        self.meta.setdefault("python", platform.python_version())

    def suite(self, name: str) -> SuiteResult:
        for s in self.suites:
            if s.name == name:
                return s
        raise KeyError(f"no suite {name!r} in this report (suites: {', '.join(s.name for s in self.suites)})")

    def to_dict(self, include_texts: bool = False) -> dict[str, object]:
        return {
            "format": REPORT_FORMAT,
            "kind": "rag_lab.eval.report",
            "meta": self.meta,
            "suites": [s.to_dict(include_texts) for s in self.suites],
        }

    def to_json(self, include_texts: bool = False) -> str:
        return json.dumps(self.to_dict(include_texts), indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<report>") -> EvalReport:
        if not isinstance(d, Mapping) or d.get("kind") != "rag_lab.eval.report":
            raise ReportError(f"{source}: not a rag_lab evaluation report (missing kind 'rag_lab.eval.report')")
        if d.get("format") != REPORT_FORMAT:
            raise ReportError(f"{source}: report format {d.get('format')!r}, this rag_lab reads {REPORT_FORMAT}")
        validate_report_data(d, source)
        try:
            return cls([SuiteResult.from_dict(s) for s in d["suites"]], dict(d.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ReportError(f"{source}: malformed report: {type(exc).__name__}: {exc}") from None


def load_report(path: str | Path) -> EvalReport:
    """Read a report JSON (as written by :func:`write_report`)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{p}: file not found") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{p}: cannot read report JSON: {exc}") from None
    return EvalReport.from_dict(data, source=str(p))
