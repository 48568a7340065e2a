"""Sweep parameter specs (``--param``): parsing, ranges checked against PipelineParams, grid
expansion, the objective's direction, and the options of a sweep run."""

from __future__ import annotations

import itertools
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:  # pragma: no cover
    from optuna.trial import Trial


#: KB index settings a sweep may vary besides PipelineParams.
INDEX_PARAMS: dict[str, tuple[str, tuple[object, ...]]] = {
    "bm25_k1": ("float", (0.0, 10.0)),
    "bm25_b": ("float", (0.0, 1.0)),
    "bm25_method": ("choice", ("robertson", "lucene", "atire", "bm25l", "bm25+")),
}
#: a swept parameter's value (a PipelineParams field or an index setting)
ParamValue = bool | int | float | str
_DEFAULT_BM25 = {"bm25_k1": 1.5, "bm25_b": 0.75, "bm25_method": "robertson"}
_MAX_GRID_STEPS = 10_000


class SweepError(ValueError):
    """A bad --param spec, objective or sweep setting; the message names it."""


# --------------------------------------------------------------------------- parameter specs


@dataclass
class ParamSpace:
    """One swept parameter: grid ``values`` and, for numbers, the optuna range."""

    name: str
    kind: str  # "float" | "int" | "bool" | "choice"
    values: Sequence[ParamValue] | None = None  # None: continuous (optuna only)
    low: float | None = None
    high: float | None = None
    step: float | None = None

    def suggest(self, trial: Trial) -> ParamValue | None:
        if self.kind in ("bool", "choice") or (self.values is not None and self.step is None):
            return trial.suggest_categorical(self.name, list(self.values or []))
        assert self.low is not None and self.high is not None, f"{self.name}: a range needs low and high"
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1))
        return self.normalise(trial.suggest_float(self.name, float(self.low), float(self.high), step=self.step))

    def normalise(self, value: ParamValue) -> ParamValue:
        """A sampled value as the sweep records it: stepped floats rounded to grid values (0.3,
        not 0.30000000000000004); anything else unchanged."""
        if self.kind == "float" and self.step and isinstance(value, float):
            return round(value, 10)
        return value


def _field_kind(name: str) -> tuple[str, tuple[object, ...]]:
    """(kind, range or choices) of a PipelineParams field or index param."""
    from rag_lab.types.params import PipelineParams

    if name in INDEX_PARAMS:
        return INDEX_PARAMS[name]
    fields = PipelineParams.model_fields
    if name not in fields:
        from rag_lab.types.params import did_you_mean

        raise SweepError(
            f"--param {name}: not a PipelineParams field nor one of {', '.join(INDEX_PARAMS)}{did_you_mean(name)}"
        )
    ann = fields[name].annotation
    if typing.get_origin(ann) is typing.Literal:
        return "choice", typing.get_args(ann)
    if ann is bool:
        return "bool", (False, True)
    rng = PipelineParams.field_ranges().get(name, (None, None))
    if ann is int:
        return "int", rng
    if ann is float:
        return "float", rng
    raise SweepError(f"--param {name}: field type {getattr(ann, '__name__', ann)} cannot be swept")


def _number(text: str, kind: str, where: str) -> float | int:
    try:
        v = float(text)
    except ValueError:
        raise SweepError(f"{where}: {text!r} is not a number") from None
    if kind == "int":
        if v != int(v):
            raise SweepError(f"{where}: {text!r} must be an integer")
        return int(v)
    return v


def _check_range(name: str, v: float, rng: object, where: str) -> None:
    lo, hi = rng if isinstance(rng, tuple) and len(rng) == 2 else (None, None)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise SweepError(f"{where}: {name}={v!r} is outside the declared range [{lo}, {hi}]")


def parse_param(spec: str) -> ParamSpace:
    """Parse ``name=lo:hi:step`` / ``name=lo:hi`` / ``name=a,b,c`` / ``name=v`` (see the module doc)."""
    where = f"--param {spec!r}"
    if "=" not in spec:
        raise SweepError(f"{where}: expected NAME=SPEC (e.g. rerank_threshold=0.1:0.9:0.1)")
    name, _, body = (x.strip() for x in spec.partition("="))
    kind, rng = _field_kind(name)
    if not body:
        raise SweepError(f"{where}: empty value spec")
    if kind in ("bool", "choice"):
        items = [x.strip() for x in body.split(",") if x.strip()]
        vals: list[ParamValue] = []
        for it in items:
            if kind == "bool":
                low = it.lower()
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise SweepError(f"{where}: {it!r} is not a boolean (true/false)")
                vals.append(low in ("true", "1", "yes"))
            else:
                if it not in rng:
                    raise SweepError(f"{where}: {it!r} is not one of {', '.join(map(str, rng))}")
                vals.append(it)
        return ParamSpace(name, kind, list(dict.fromkeys(vals)))
    if ":" in body:
        parts = body.split(":")
        if len(parts) not in (2, 3):
            raise SweepError(f"{where}: a range is lo:hi or lo:hi:step")
        lo, hi = _number(parts[0], kind, where), _number(parts[1], kind, where)
        if hi < lo:
            raise SweepError(f"{where}: high {hi} < low {lo}")
        _check_range(name, lo, rng, where)
        _check_range(name, hi, rng, where)
        if len(parts) == 2:
            if kind == "int":
                return ParamSpace(name, kind, list(range(int(lo), int(hi) + 1)), lo, hi, 1)
            return ParamSpace(name, kind, None, lo, hi, None)
        step = _number(parts[2], kind, where)
        if step <= 0:
            raise SweepError(f"{where}: step must be > 0")
        n = int(math.floor((hi - lo) / step + 1e-9)) + 1
        if n > _MAX_GRID_STEPS:
            raise SweepError(f"{where}: {n} grid values (limit {_MAX_GRID_STEPS})")
        if kind == "int":
            values: list[int] | list[float] = [int(lo + i * step) for i in range(n)]
        else:
            values = [round(lo + i * step, 10) for i in range(n)]
            hi = values[-1]  # optuna needs (high - low) to be a multiple of step
        return ParamSpace(name, kind, values, lo, hi, step)
    nums = [_number(x.strip(), kind, where) for x in body.split(",") if x.strip()]
    for v in nums:
        _check_range(name, v, rng, where)
    return ParamSpace(name, kind, list(dict.fromkeys(nums)))


def grid_configs(spaces: Sequence[ParamSpace]) -> list[dict[str, ParamValue]]:
    """The cartesian product of the spaces' values, first space varying slowest."""
    for s in spaces:
        if s.values is None:
            raise SweepError(
                f"--param {s.name}={s.low}:{s.high} is continuous: give a step for a grid, or use --optuna-trials"
            )
    names = [s.name for s in spaces]
    if len(set(names)) != len(names):
        raise SweepError(f"a parameter is given twice: {names}")
    return [dict(zip(names, combo)) for combo in itertools.product(*(s.values or [] for s in spaces))]


# --------------------------------------------------------------------------- objective


def objective_direction(objective: str) -> str:
    """'maximize' for quality metrics, 'minimize' for latency; raises for LLM / unknown metrics."""
    from rag_lab.eval.ragas_adapter import LLM_METRICS, OFFLINE_METRICS

    if objective in ("latency_ms", "p95_latency_ms"):
        return "minimize"
    if objective in LLM_METRICS:
        raise SweepError(
            f"objective {objective!r} needs an LLM judge: sweeps rank configs by LLM-free metrics; "
            "evaluate the best config with `rag-lab eval --ragas-llm`"
        )
    if objective in OFFLINE_METRICS:
        return "maximize"
    from rag_lab.eval.funnel import parse_funnel_metric
    from rag_lab.eval.metric_defs import metric

    if parse_funnel_metric(objective) is not None:  # the gold funnel (search.recall@50, funnel.lost_at.rerank, …)
        return "maximize" if metric(objective).higher_is_better else "minimize"
    prefix, _, k = objective.partition("@")
    if objective in ("mrr", "map") or (
        prefix in ("recall", "precision", "hit", "ndcg", "mrr") and k.isdigit() and int(k) > 0
    ):
        return "maximize"
    raise SweepError(
        f"unknown objective {objective!r}: use a retrieval metric (ndcg@10, recall@5, mrr, map, …), "
        "a gold-funnel metric (search.recall@50, rerank.hit@10, funnel.lost_at.rerank, …), "
        f"an offline ragas metric ({', '.join(OFFLINE_METRICS)}) or latency_ms"
    )


#: what a row's ``latency_ms`` measured (the CSV's ``latency_of`` column)
LATENCY_OF_CAPTURE = "capture runs: the pipeline at this config's retrieval settings, not this config"
LATENCY_OF_PIPELINE = "pipeline: this config, every question"


def p95(lat: Sequence[float]) -> float:
    """The 95th percentile as sweep rows give it (the nearest rank; NaN for none)."""
    if not lat:
        return math.nan
    s = sorted(lat)
    return s[min(len(s) - 1, int(math.ceil(0.95 * len(s))) - 1)]


class TuneOptions(TypedDict, total=False):
    """:class:`SweepOptions` less ``base_params`` and ``progress`` (what
    :func:`~rag_lab.eval.sweep.holdout.run_holdout` passes on to the sweep as given)."""

    ks: Sequence[int]
    ragas_metrics: Sequence[str]
    cache_dir: str | Path | None
    fast: bool
    check: int | str


class SweepOptions(TuneOptions, total=False):
    """The keyword options of :func:`run_grid` and :func:`run_optuna` (defaults in brackets):
    ``ks`` (1, 3, 5, 10), ``ragas_metrics`` (none), ``base_params`` (the params every config
    starts from; none), ``cache_dir`` (the stage cache's folder; None runs without it),
    ``progress`` (True), ``fast`` (True: the tuning evaluator's fast path), ``check`` (0: how many
    of the best configs, or ``"all"``, the fast path re-runs on the full pipeline)."""

    base_params: Mapping[str, object] | None
    progress: bool


@dataclass(frozen=True, slots=True)
class RunOptions:
    """:class:`SweepOptions` with the defaults filled in."""

    ks: Sequence[int] = (1, 3, 5, 10)
    ragas_metrics: Sequence[str] = ()
    base_params: Mapping[str, object] | None = None
    cache_dir: str | Path | None = None
    progress: bool = True
    fast: bool = True
    check: int | str = 0
