"""The report schema, checked before anything reads or compares a report: every value a number
(not a string, not a bool) inside its metric's declared range (:mod:`rag_lab.eval.metric_defs`),
one row per question, a per-question record for every row (and a row for every scored record),
every metric the suite's cut-offs declare present on every row, known metric names only.

:func:`validate_report_data` checks the JSON form (as read from a file); :func:`validate_report`
an in-memory :class:`~rag_lab.eval.report.EvalReport` (the gate checks both sides). Problems are
collected, not stopped at the first (the schema is strict pydantic models; checks across fields run
once those fields are well formed), and raised as one :class:`ReportSchemaError` whose lines each
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

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Self, TypeGuard

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, ValidationInfo, create_model
from pydantic.functional_validators import BeforeValidator, PlainValidator, field_validator, model_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from rag_lab.eval.metric_defs import is_known_metric, metric
from rag_lab.eval.metrics import retrieval_metric_names
from rag_lab.eval.saturation import saturation_problems
from rag_lab.tuning.funnel import CHAIN, STAGES

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.report.model import EvalReport

__all__ = ["ReportError", "ReportSchemaError", "validate_report", "validate_report_data"]

_ROW_COUNTS = ("n_retrieved", "n_gold", "n_duplicates")
_MAX_LISTED = 12

Loc = tuple[int | str, ...]
Problems = list[tuple[Loc, str]]  # (location below the value being validated, message)


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


def _is_number(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_whole(v: object, low: int) -> bool:
    """An integer-valued number >= ``low`` (``3.0`` counts; a bool, NaN or inf does not)."""
    return _is_number(v) and math.isfinite(v) and v == int(v) and v >= low


def _is_name(v: object) -> TypeGuard[str]:
    return isinstance(v, str) and v != ""


def _is_strings(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_ks(v: object) -> bool:
    return isinstance(v, list) and v != [] and all(_is_whole(k, 1) for k in v) and len(set(v)) == len(v)


def _head(items: Sequence[object], n: int = 3) -> str:
    return ", ".join(map(repr, items[:n])) + (", …" if len(items) > n else "")


def _value_problem(name: str, v: object, nan_ok: bool = True, unknown: str = "unknown metric name") -> str | None:
    """What is wrong with ``v`` as a value of metric ``name`` (``unknown``: no such metric), or
    None. Null and NaN stand for a value that could not be computed: allowed where ``nan_ok``."""
    if not is_known_metric(name):
        return unknown
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None if nan_ok else "missing value (null / NaN): retrieval metrics are always computed"
    if not _is_number(v):
        return f"{v!r} is a {type(v).__name__}, not a number"
    m = metric(name)
    return None if m.contains(float(v)) else f"{v!r} is outside the range [{m.low:g}, {m.high:g}]"


def _raise(problems: Problems) -> None:
    """One ValidationError for all ``problems`` (raised in a validator, pydantic puts the location
    of the value it validates in front of each); messages travel as context, braces and all."""
    errors = [
        InitErrorDetails(type=PydanticCustomError("report", "{m}", {"m": m}), loc=at, input=0) for at, m in problems
    ]
    if errors:
        raise ValidationError.from_exception_data("report", errors)


def _repeated(keys: Sequence[object], why: str, *at: int | str) -> Problems:
    """``why`` at every position of ``keys`` holding a key seen before."""
    first = {k: j for j, k in reversed(list(enumerate(keys)))}
    return [((*at, j), why) for j, k in enumerate(keys) if first[k] != j]


def _rule(ok: Callable[[object], bool], why: str) -> PlainValidator:
    """A value kept as it is when ``ok``; ``why`` words a refusal (``{v}`` the value, ``{t}`` its type)."""

    def check(v: object) -> object:
        _raise([] if ok(v) else [((), why.format(v=v, t=type(v).__name__))])
        return v

    return PlainValidator(check)


def _judge_calibration(meta: object) -> object:
    if isinstance(meta, Mapping) and "judge_calibration" in meta:
        from rag_lab.eval.judge.calibrate import calibration_problems

        _raise([((), p) for p in calibration_problems(meta["judge_calibration"])])
    return meta


def _summary(summary: object) -> object:
    items = summary.items() if isinstance(summary, Mapping) else ()  # not an object: left alone
    _raise([((m,), p) for m, v in items if (p := _value_problem(str(m), v))])
    return summary


_Name = Annotated[str | None, _rule(_is_name, "{v!r} is not a non-empty string")]
_Count = Annotated[float | None, _rule(lambda v: v is None or _is_whole(v, 0), "{v!r} is not a count (integer >= 0)")]
_Text = Annotated[str, _rule(lambda v: isinstance(v, str), "{v!r} is a {t}, not a string")]
_Strings = Annotated[list[str], _rule(_is_strings, "not a list of strings")]
_Qids = Annotated[Any, _rule(_is_strings, "not a list of question ids")]  # Any: its refused None default
_Latency = Annotated[float, _rule(lambda v: _is_number(v) and 0 <= v < math.inf, "{v!r} is not a number >= 0")]
_DocId = Annotated[str | None, _rule(lambda v: isinstance(v, str), "{v!r} is not a document id")]
_Metric = Annotated[str, _rule(lambda v: isinstance(v, str) and is_known_metric(v), "unknown metric name")]
_LostAt = Annotated[str, _rule(lambda v: v in ("", *CHAIN), "{v!r} is not a stage")]
_Ks = Annotated[list[int] | None, _rule(_is_ks, "{v!r} is not a list of distinct integers >= 1")]
_Means = Annotated[dict[str, object] | None, BeforeValidator(lambda v: v or None)]  # {} or null: none
_ABSENT = object()  # a declared metric left out of a row


class _Model(BaseModel):
    """Strict (a list is a list, an object a dict); unnamed fields allowed, not checked."""

    model_config = ConfigDict(strict=True, extra="allow", validate_default=True)

    def problems(self) -> Problems:
        """What is wrong across the fields, checked once each field is well formed."""
        return []

    @model_validator(mode="after")
    def _across_fields(self) -> Self:
        _raise(self.problems())
        return self


@functools.cache
def _rows_type(ks: tuple[int, ...]) -> TypeAdapter[list[object]]:
    """Metric rows under cut-offs ``ks``: a qid, each declared metric (never null), the counts, nothing else."""
    absent = f"missing (the suite's cut-offs {list(ks)} declare it)"

    def declared(name: str) -> tuple[object, object]:
        def check(v: object) -> object:
            problem = absent if v is _ABSENT else _value_problem(name, v, nan_ok=False)
            _raise([((), problem)] if problem else [])
            return v

        return Annotated[object, PlainValidator(check)], _ABSENT

    fields: dict[str, Any] = {n: declared(n) for n in retrieval_metric_names(ks)}  # any string names a field
    config = ConfigDict(strict=True, extra="forbid", validate_default=True)
    row = create_model(
        "Row", __config__=config, qid=(_Name, None), **fields | dict.fromkeys(_ROW_COUNTS, (_Count, None))
    )
    return TypeAdapter(list[row])  # type: ignore[valid-type]  # a model made at run time


class _Retrieval(_Model):
    ks: _Ks = None
    rows: list[Any]
    excluded_queries: object = None

    @field_validator("rows")
    @classmethod
    def _rows_follow_ks(cls, rows: list[object], info: ValidationInfo) -> list[object]:
        if "ks" not in info.data:  # unreadable cut-offs: nothing to check the rows against
            return rows
        return list(_rows_type(tuple(int(k) for k in info.data["ks"])).validate_python(rows))


class _GoldTrace(_Model):
    id: _DocId = None
    ranks: dict[str, object]
    lost_at: _LostAt = ""

    def problems(self) -> Problems:
        why = f"ranks are integers >= 1 (or null) of the stages {', '.join(STAGES)}"
        bad = [s for s, r in self.ranks.items() if s not in STAGES or not (r is None or _is_whole(r, 1))]
        return [(("ranks", s), f"{self.ranks[s]!r}: {why}") for s in bad]


class _QuestionFunnel(_Model):
    gold: list[_GoldTrace] = []  # a record's gold funnel: ``{}`` in reports written before it


class _Record(_Model):
    qid: _Name = None
    gold_ids: _Strings = []
    retrieved_doc_ids: _Strings = []
    context_ids: _Strings = []
    context_doc_ids: _Strings = []
    answer: _Text = ""
    error: _Text = ""
    question: _Text = ""
    latency_ms: _Latency = 0.0
    funnel: _QuestionFunnel = _QuestionFunnel()


class _Ragas(_Model):
    qids: _Qids = None
    metrics: list[_Metric]
    values: dict[str, object]
    repeats: dict[str, object] | None = None  # ``eval --judge-repeats N``

    def problems(self) -> Problems:
        """Each question scored once, one value per question of each scored metric; repeats: per
        scored metric one list of N values per question, N >= 2 the same everywhere."""
        n, out = len(self.qids), Problems()
        if dup := sorted(q for q, c in Counter[str](self.qids).items() if c > 1):
            out.append((("qids", self.qids.index(dup[0])), f"{len(dup)} question(s) scored twice ({_head(dup)})"))
        for m in self.metrics:
            vals = self.values.get(m)
            if isinstance(vals, list) and len(vals) == n:
                out += [(("values", m, i), p) for i, v in enumerate(vals) if (p := _value_problem(m, v))]
            else:
                out.append((("values", m), f"{len(vals) if isinstance(vals, list) else None} values for {n} questions"))
        sizes: set[int] = set()
        for m, reps in (self.repeats or {}).items():
            if m not in self.metrics:
                out.append((("repeats", m), "repeats of a metric the suite did not score"))
            elif isinstance(reps, list) and len(reps) == n and all(isinstance(r, list) for r in reps):
                sizes.update(map(len, reps))
                out += [
                    (("repeats", m, i, j), p)
                    for i, r in enumerate(reps)
                    for j, v in enumerate(r)
                    if (p := _value_problem(m, v))
                ]
            else:
                out.append((("repeats", m), f"needs one list of repeats for each of the {n} questions"))
        if len(sizes) > 1 or sizes & {0, 1}:
            out.append((("repeats",), f"repeat counts {sorted(sizes)}: expected one count >= 2"))
        return out


class _FunnelMeans(_Model):
    """A suite's gold-funnel means: ``{family: {stage: {k: value}}}``, ``lost_at: {stage: value}``."""

    recall: _Means = None
    hit: _Means = None
    ar: _Means = None
    lost_at: _Means = None

    def problems(self) -> Problems:
        out: Problems = []
        for family, by_stage in (("recall", self.recall), ("hit", self.hit), ("ar", self.ar)):
            for stage, by_k in (by_stage or {}).items():
                for k, v in by_k.items() if isinstance(by_k, Mapping) else ():
                    if p := _value_problem(f"{stage}.{family}@{k}", v, unknown="unknown stage or cut-off"):
                        out.append(((family, stage, k), p))
        for stage, v in (self.lost_at or {}).items():
            if p := _value_problem(f"funnel.lost_at.{stage}", v, unknown="unknown stage"):
                out.append((("lost_at", stage), p))
        return out


class _Suite(_Model):
    name: _Name = None
    retrieval: _Retrieval
    records: list[_Record]
    ragas: _Ragas | None = None
    funnel: _FunnelMeans | None = None
    summary: Annotated[object, PlainValidator(_summary)] = None
    #: ``{metric: {n, at_ceiling, at_floor}}`` (:mod:`rag_lab.eval.saturation`)
    saturation: Annotated[object, PlainValidator(lambda v: _raise(saturation_problems(v)) or v)] = None

    def problems(self) -> Problems:
        """One metric row and one record per question; a record for every row and every question
        ragas scored, a row for every record (but the excluded questions: no gold)."""
        rows, recs = [r.qid for r in self.retrieval.rows], [r.qid for r in self.records]
        excluded = self.retrieval.excluded_queries if isinstance(self.retrieval.excluded_queries, list) else []
        skip, known = {*rows, *map(str, excluded)}, set(recs)
        out = _repeated(rows, "the question has more than one metric row", "retrieval", "rows")
        out += _repeated(recs, "the question has more than one record", "records")
        for at, qids, keep, why in (
            (("retrieval", "rows"), rows, known, "no per-question record for {n} metric row(s) ({head})"),
            (("records",), recs, skip, "{n} record(s) without a metric row and not excluded ({head})"),
            (("ragas", "qids"), self.ragas.qids if self.ragas else [], known, "{n} scored question(s) have no record"),
        ):
            if lost := [j for j, q in enumerate(qids) if q not in keep]:
                out.append(((*at, lost[0]), why.format(n=len(lost), head=_head([qids[j] for j in lost]))))
        return out


class _Report(_Model):
    suites: list[_Suite]
    meta: Annotated[object, PlainValidator(_judge_calibration)] = None

    def problems(self) -> Problems:
        return _repeated([s.name for s in self.suites], "the suite appears twice", "suites")


def _get(node: object, key: int | str) -> object:
    if isinstance(node, Mapping):
        return node.get(key)
    return node[key] if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node) else None


def _where(loc: Loc, data: object) -> str:
    """``suite 's', question 'q', field 'f'`` for an error's location, its positions named from
    the report ``data``: among the suites by the suite's name, among rows and records by the
    question's id, in ragas' lists by the ragas qid at that position (a ragas value's field is its
    metric), among gold traces by the document id, among ragas metrics by the metric."""
    suite = question = ""
    field: list[str] = []
    node, up, qids = data, None, None
    for key in loc:
        node = _get(node, key)
        if isinstance(key, str):
            field.append(key)
            qids = _get(node, "qids") if key == "ragas" else qids
        elif up == "suites":
            name = _get(node, "name")
            suite, field = (f"suite {name!r}" if _is_name(name) else f"suite #{key + 1}"), []
        elif up in ("rows", "records"):
            qid = _get(node, "qid")
            question, field = repr(qid if _is_name(qid) else f"{'row' if up == 'rows' else 'record'} #{key + 1}"), []
        elif up == "metrics":
            field[-1] += f"[{node!r}]"
        elif up == "gold":
            doc = _get(node, "id")
            field[-1] += f"[{doc!r}]" if isinstance(doc, str) else ""
        elif not question and isinstance(qids, list) and key < len(qids):
            question, field = repr(qids[key]), field[-1:] if field[-2:-1] == ["values"] else field
        up = key
    parts = [suite, question and f"question {question}", field and f"field {'.'.join(field)!r}"]
    return ", ".join(p for p in parts if p)


def _line(err: ErrorDetails, data: object) -> str:
    """An error as a problem line: where (calibration lines say it themselves), then what: our
    message as raised, pydantic's own ones reworded."""
    loc, kind, t = err["loc"], err["type"], type(err["input"]).__name__
    words = {"missing": "missing", "list_type": f"is a {t}, not a list", "model_type": f"is a {t}, not an object"}
    what = words.get(kind, f"is a {t}, not an object" if kind == "dict_type" else err["msg"])
    if kind == "extra_forbidden":  # only metric rows forbid unknown fields
        what = "a metric the suite's cut-offs do not declare" if is_known_metric(str(loc[-1])) else "unknown field"
    where = "" if loc[:1] == ("meta",) else _where(loc, data)
    return f"{where}: {what}" if where else what


def validate_report_data(data: Mapping[str, object], source: str = "<report>") -> None:
    """Check a report's JSON form; raise :class:`ReportSchemaError` listing every problem."""
    try:
        _Report.model_validate(data)
    except ValidationError as exc:
        raise ReportSchemaError(source, [_line(err, data) for err in exc.errors()]) from None


def validate_report(report: EvalReport, source: str = "<report>") -> None:
    """:func:`validate_report_data` on an in-memory report (its rows, ragas values and records as
    they are, before any mean is computed)."""
    suites = []
    for s in report.suites:
        rt, rg = s.retrieval, s.ragas
        ragas = None if rg is None else {k: getattr(rg, k) for k in ("metrics", "qids", "values", "repeats")}
        retrieval = {"ks": list(rt.ks), "rows": rt.rows, "excluded_queries": list(rt.excluded_queries)}
        records = [r.to_dict() for r in s.records]
        suites.append({"name": s.name, "retrieval": retrieval, "ragas": ragas, "records": records})
    validate_report_data({"suites": suites, "meta": dict(report.meta or {})}, source)
