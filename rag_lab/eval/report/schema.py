"""The report schema, checked before anything reads or compares a report: every value a number
(not a string, not a bool) inside its metric's declared range (:mod:`rag_lab.eval.metric_defs`),
one row per question, a per-question record for every row (and a row for every scored record),
every metric the suite's cut-offs declare present on every row, known metric names only.

:func:`validate_report_data` checks the JSON form (as read from a file); :func:`validate_report`
an in-memory :class:`~rag_lab.eval.report.EvalReport` (the gate checks both sides). Problems are
collected, not stopped at the first, and raised as one :class:`ReportSchemaError` whose lines each
name the file, suite, question and field:

>>> bad = {"kind": "rag_lab.eval.report", "format": 1, "suites": [{"name": "s", "retrieval": {
...     "ks": [1], "rows": [{"qid": "q1", "n_retrieved": 1, "n_gold": 1, "n_duplicates": 0,
...     "recall@1": 7.5, "precision@1": 1, "hit@1": 1, "ndcg@1": 1, "mrr@1": 1, "mrr": 1, "map": "1"}]},
...     "records": [{"qid": "q1"}]}]}
>>> try:
...     validate_report_data(bad, "cur.json")
... except ReportSchemaError as exc:
...     print(exc)
cur.json: 2 problems:
  suite 's', question 'q1', field 'recall@1': 7.5 is outside the range [0, 1]
  suite 's', question 'q1', field 'map': '1' is a str, not a number
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rag_lab.eval.metric_defs import is_known_metric, metric
from rag_lab.eval.metrics import retrieval_metric_names

__all__ = ["ReportError", "ReportSchemaError", "validate_report", "validate_report_data"]

_ROW_COUNTS = ("n_retrieved", "n_gold", "n_duplicates")
_MAX_LISTED = 12


class ReportError(ValueError):
    """A report file is missing, unreadable, of another format or breaks the schema."""


class ReportSchemaError(ReportError):
    """A report breaks the schema; ``problems`` holds one line per problem."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = list(problems)
        shown = self.problems[:_MAX_LISTED]
        more = len(self.problems) - len(shown)
        head = f"{source}: {len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}:"
        super().__init__("\n".join([head, *(f"  {p}" for p in shown)] + ([f"  … {more} more"] if more > 0 else [])))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _where(suite: str, qid: Any = None, field: str | None = None) -> str:
    out = f"suite {suite!r}"
    if qid is not None:
        out += f", question {qid!r}"
    if field is not None:
        out += f", field {field!r}"
    return out


def _fmt(x: float) -> str:
    return f"{x:g}" if math.isfinite(x) else ("inf" if x > 0 else "-inf")


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")

    def value(self, where: str, name: str, v: Any, *, nan_ok: bool) -> None:
        """A metric value: a number inside ``name``'s range (None/NaN only where ``nan_ok``)."""
        if v is None or (isinstance(v, float) and math.isnan(v)):
            if not nan_ok:
                self.add(where, "missing value (null / NaN): retrieval metrics are always computed")
            return
        if not _is_number(v):
            self.add(where, f"{v!r} is a {type(v).__name__}, not a number")
            return
        m = metric(name)
        if not m.contains(float(v)):
            self.add(where, f"{v!r} is outside the range [{_fmt(m.low)}, {_fmt(m.high)}]")

    def suite(self, i: int, s: Any, seen: set[str]) -> None:
        if not isinstance(s, Mapping):
            self.add(f"suite #{i + 1}", f"is a {type(s).__name__}, not an object")
            return
        name = s.get("name")
        if not isinstance(name, str) or not name:
            self.add(f"suite #{i + 1}", f"field 'name': {name!r} is not a non-empty string")
            name = f"#{i + 1}"
        elif name in seen:
            self.add(_where(name), "the suite appears twice")
        seen.add(name)
        row_qids = self.retrieval(name, s.get("retrieval"))
        rec_qids = self.records(name, s.get("records"))
        excluded = set()
        rt = s.get("retrieval")
        if isinstance(rt, Mapping) and isinstance(rt.get("excluded_queries"), list):
            excluded = {str(q) for q in rt["excluded_queries"]}
        if row_qids is not None and rec_qids is not None:
            missing = [q for q in row_qids if q not in rec_qids]
            if missing:
                self.add(
                    _where(name, missing[0]),
                    f"no per-question record for {len(missing)} metric row(s) ({_head(missing)})",
                )
            orphans = [q for q in rec_qids if q not in row_qids and q not in excluded]
            if orphans:
                self.add(
                    _where(name, orphans[0]),
                    f"{len(orphans)} record(s) without a metric row and not excluded ({_head(orphans)})",
                )
        self.ragas(name, s.get("ragas"), rec_qids)
        self.funnel_section(name, s.get("funnel"))
        summary = s.get("summary")
        if isinstance(summary, Mapping):
            for m, v in summary.items():
                if not is_known_metric(str(m)):
                    self.add(_where(name, None, f"summary.{m}"), "unknown metric name")
                else:
                    self.value(_where(name, None, f"summary.{m}"), str(m), v, nan_ok=True)

    def _keyed(self, suite: str, items: list[Any], label: str, twice: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        """``(qid, item)`` of each object with a non-empty string ``qid``; the others, and a qid
        seen before (``twice``), are reported (a repeated one is still yielded)."""
        seen: set[str] = set()
        for j, item in enumerate(items):
            if not isinstance(item, Mapping):
                self.add(_where(suite, f"{label} #{j + 1}"), f"is a {type(item).__name__}, not an object")
                continue
            qid = item.get("qid")
            if not isinstance(qid, str) or not qid:
                self.add(_where(suite, f"{label} #{j + 1}", "qid"), f"{qid!r} is not a non-empty string")
                continue
            if qid in seen:
                self.add(_where(suite, qid), twice)
            seen.add(qid)
            yield qid, item

    def retrieval(self, suite: str, rt: Any) -> list[str] | None:
        if not isinstance(rt, Mapping):
            self.add(_where(suite, None, "retrieval"), "missing or not an object")
            return None
        ks = rt.get("ks")
        if (
            not isinstance(ks, list)
            or not ks
            or not all(_is_number(k) and int(k) == k and k >= 1 for k in ks)
            or len(set(ks)) != len(ks)
        ):
            self.add(_where(suite, None, "retrieval.ks"), f"{ks!r} is not a list of distinct integers >= 1")
            return None
        names = retrieval_metric_names([int(k) for k in ks])
        expected = {"qid", *_ROW_COUNTS, *names}
        rows = rt.get("rows")
        if not isinstance(rows, list):
            self.add(_where(suite, None, "retrieval.rows"), "missing or not a list")
            return None
        qids: list[str] = []
        for qid, row in self._keyed(suite, rows, "row", "the question has more than one metric row"):
            qids.append(qid)
            for m in names:
                if m not in row:
                    self.add(_where(suite, qid, m), f"missing (the suite's cut-offs {ks} declare it)")
                else:
                    self.value(_where(suite, qid, m), m, row[m], nan_ok=False)
            for c in _ROW_COUNTS:
                v = row.get(c)
                if v is not None and not (_is_number(v) and v >= 0 and int(v) == v):
                    self.add(_where(suite, qid, c), f"{v!r} is not a count (integer >= 0)")
            for extra in sorted(set(row) - expected):
                what = "a metric the suite's cut-offs do not declare" if is_known_metric(extra) else "unknown field"
                self.add(_where(suite, qid, str(extra)), what)
        return qids

    def records(self, suite: str, recs: Any) -> set[str] | None:
        if not isinstance(recs, list):
            self.add(_where(suite, None, "records"), "missing or not a list (the per-question records)")
            return None
        out: set[str] = set()
        for qid, r in self._keyed(suite, recs, "record", "the question has more than one record"):
            out.add(qid)
            for f in ("gold_ids", "retrieved_doc_ids", "context_ids", "context_doc_ids"):
                v = r.get(f, [])
                if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                    self.add(_where(suite, qid, f), "not a list of strings")
            for f in ("answer", "error", "question"):
                v = r.get(f, "")
                if not isinstance(v, str):
                    self.add(_where(suite, qid, f), f"{v!r} is a {type(v).__name__}, not a string")
            lat = r.get("latency_ms", 0.0)
            if not (_is_number(lat) and math.isfinite(lat) and lat >= 0):
                self.add(_where(suite, qid, "latency_ms"), f"{lat!r} is not a number >= 0")
            self.funnel_record(suite, qid, r.get("funnel", {}))
        return out

    def funnel_record(self, suite: str, qid: str, f: Any) -> None:
        """A record's gold funnel (optional: ``{}`` or absent in reports written before it)."""
        from rag_lab.tuning.funnel import CHAIN, STAGES

        if not isinstance(f, Mapping):
            self.add(_where(suite, qid, "funnel"), f"is a {type(f).__name__}, not an object")
            return
        gold = f.get("gold", [])
        if not isinstance(gold, list):
            self.add(_where(suite, qid, "funnel.gold"), "not a list")
            return
        for g in gold:
            if not isinstance(g, Mapping) or not isinstance(g.get("id"), str):
                self.add(_where(suite, qid, "funnel.gold"), f"{g!r} is not a gold trace with a document id")
                continue
            ranks = g.get("ranks")
            if not isinstance(ranks, Mapping):
                self.add(_where(suite, qid, f"funnel.gold[{g['id']!r}].ranks"), "not an object")
                continue
            for stage, rank in ranks.items():
                if stage not in STAGES or not (rank is None or (_is_number(rank) and int(rank) == rank and rank >= 1)):
                    self.add(
                        _where(suite, qid, f"funnel.gold[{g['id']!r}].ranks.{stage}"),
                        f"{rank!r}: ranks are integers >= 1 (or null) of the stages {', '.join(STAGES)}",
                    )
            if g.get("lost_at", "") not in ("", *CHAIN):
                self.add(
                    _where(suite, qid, f"funnel.gold[{g['id']!r}].lost_at"), f"{g.get('lost_at')!r} is not a stage"
                )

    def funnel_section(self, suite: str, fs: Any) -> None:
        """The suite's ``funnel`` section: per-stage values inside the metrics' ranges."""
        if fs is None:
            return
        if not isinstance(fs, Mapping):
            self.add(_where(suite, None, "funnel"), f"is a {type(fs).__name__}, not an object")
            return
        for family in ("recall", "hit", "ar"):
            for stage, by_k in (fs.get(family) or {}).items():
                for k, v in (by_k or {}).items() if isinstance(by_k, Mapping) else ():
                    name = f"{stage}.{family}@{k}"
                    if not is_known_metric(name):
                        self.add(_where(suite, None, f"funnel.{family}.{stage}.{k}"), "unknown stage or cut-off")
                    else:
                        self.value(_where(suite, None, f"funnel.{family}.{stage}.{k}"), name, v, nan_ok=True)
        for stage, v in (fs.get("lost_at") or {}).items():
            name = f"funnel.lost_at.{stage}"
            if not is_known_metric(name):
                self.add(_where(suite, None, f"funnel.lost_at.{stage}"), "unknown stage")
            else:
                self.value(_where(suite, None, f"funnel.lost_at.{stage}"), name, v, nan_ok=True)

    def ragas(self, suite: str, rg: Any, rec_qids: set[str] | None) -> None:
        if rg is None:
            return
        if not isinstance(rg, Mapping):
            self.add(_where(suite, None, "ragas"), f"is a {type(rg).__name__}, not an object")
            return
        metrics, qids, values = rg.get("metrics"), rg.get("qids"), rg.get("values")
        if not isinstance(qids, list) or not all(isinstance(q, str) for q in qids):
            self.add(_where(suite, None, "ragas.qids"), "not a list of question ids")
            return
        dup = sorted({q for q in qids if qids.count(q) > 1})
        if dup:
            self.add(_where(suite, dup[0], "ragas.qids"), f"{len(dup)} question(s) scored twice ({_head(dup)})")
        if rec_qids is not None:
            unknown = [q for q in qids if q not in rec_qids]
            if unknown:
                self.add(_where(suite, unknown[0], "ragas.qids"), f"{len(unknown)} scored question(s) have no record")
        if not isinstance(metrics, list) or not isinstance(values, Mapping):
            self.add(_where(suite, None, "ragas"), "needs a 'metrics' list and a 'values' object")
            return
        for m in metrics:
            if not isinstance(m, str) or not is_known_metric(m):
                self.add(_where(suite, None, f"ragas.metrics[{m!r}]"), "unknown metric name")
                continue
            vals = values.get(m)
            if not isinstance(vals, list) or len(vals) != len(qids):
                n = len(vals) if isinstance(vals, list) else None
                self.add(_where(suite, None, f"ragas.values.{m}"), f"{n} values for {len(qids)} questions")
                continue
            for q, v in zip(qids, vals):
                self.value(_where(suite, q, m), m, v, nan_ok=True)
        self.repeats(suite, rg.get("repeats"), qids, metrics)

    def repeats(self, suite: str, reps: Any, qids: list[str], metrics: list[Any]) -> None:
        """``ragas.repeats`` (optional, ``eval --judge-repeats N``): per scored metric one list of
        N values per question, N the same everywhere."""
        if reps is None:
            return
        if not isinstance(reps, Mapping):
            self.add(_where(suite, None, "ragas.repeats"), f"is a {type(reps).__name__}, not an object")
            return
        sizes: set[int] = set()
        for m, rows in reps.items():
            w = _where(suite, None, f"ragas.repeats.{m}")
            if m not in metrics:
                self.add(w, "repeats of a metric the suite did not score")
                continue
            if not isinstance(rows, list) or len(rows) != len(qids) or not all(isinstance(r, list) for r in rows):
                self.add(w, f"needs one list of repeats for each of the {len(qids)} questions")
                continue
            for q, row in zip(qids, rows):
                sizes.add(len(row))
                for v in row:
                    self.value(_where(suite, q, f"ragas.repeats.{m}"), str(m), v, nan_ok=True)
        if len(sizes) > 1 or 0 in sizes or 1 in sizes:
            self.add(_where(suite, None, "ragas.repeats"), f"repeat counts {sorted(sizes)}: expected one count >= 2")


def _head(items: Sequence[str], n: int = 3) -> str:
    return ", ".join(map(repr, items[:n])) + (", …" if len(items) > n else "")


def validate_report_data(data: Mapping[str, Any], source: str = "<report>") -> None:
    """Check a report's JSON form; raise :class:`ReportSchemaError` listing every problem."""
    c = _Checker()
    suites = data.get("suites")
    if not isinstance(suites, list):
        raise ReportSchemaError(source, ["field 'suites': missing or not a list"])
    seen: set[str] = set()
    for i, s in enumerate(suites):
        c.suite(i, s, seen)
    meta = data.get("meta")
    if isinstance(meta, Mapping) and "judge_calibration" in meta:
        from rag_lab.eval.judge.calibrate import calibration_problems

        c.problems += calibration_problems(meta["judge_calibration"])
    if c.problems:
        raise ReportSchemaError(source, c.problems)


def validate_report(report: Any, source: str = "<report>") -> None:
    """:func:`validate_report_data` on an in-memory report (its rows, ragas values and records as
    they are, before any mean is computed)."""
    suites = []
    for s in report.suites:
        rg = s.ragas
        suites.append(
            {
                "name": s.name,
                "retrieval": {
                    "ks": list(s.retrieval.ks),
                    "rows": s.retrieval.rows,
                    "excluded_queries": list(s.retrieval.excluded_queries),
                },
                "ragas": None
                if rg is None
                else {
                    "metrics": rg.metrics,
                    "qids": rg.qids,
                    "values": rg.values,
                    **({"repeats": rg.repeats} if rg.repeats else {}),
                },
                "records": [r.to_dict() for r in s.records],
            }
        )
    validate_report_data({"suites": suites, "meta": dict(report.meta or {})}, source)
