"""Parameter sweeps: grid and optuna over PipelineParams fields within their declared ranges.

A sweep evaluates configs (dicts of overrides) on one or more dataset slices and ranks them by an
LLM-free objective: a retrieval metric (``ndcg@10``, ``recall@5``, ``mrr``, ``map``, …) or an
offline ragas metric (``id_context_recall``, ``chrf``, …); with several suites the objective is the
mean of the suite means. LLM-judge metrics are refused as objectives (run them on the best config).

The stage cache (:mod:`rag_lab.eval.cache`) is on by default, so a sweep over post-retrieval
params (rerank threshold, MMR λ, composite weights, top-K, merge overlap…) searches and reranks
each question once. Latency is recorded as run, i.e. with cache reads for the cached stages.

``bm25_k1``, ``bm25_b`` and ``bm25_method`` are accepted too: they are KB index settings, not
PipelineParams; each value set is served by a BM25 index built once in the cache.

Parameter specs (``--param``): ``name=lo:hi:step`` (inclusive grid; optuna samples the same
steps), ``name=lo:hi`` (continuous; optuna only), ``name=a,b,c`` (choices), ``name=v`` (fixed).
"""

from __future__ import annotations

import itertools
import math
import time
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rag_lab.eval.datasets import Dataset
    from rag_lab.lab.lab import Lab

__all__ = [
    "INDEX_PARAMS",
    "ParamSpace",
    "SweepError",
    "SweepResult",
    "grid_configs",
    "objective_direction",
    "parse_param",
    "run_grid",
    "run_optuna",
]

#: KB index settings a sweep may vary besides PipelineParams.
INDEX_PARAMS: dict[str, tuple[str, Any]] = {
    "bm25_k1": ("float", (0.0, 10.0)),
    "bm25_b": ("float", (0.0, 1.0)),
    "bm25_method": ("choice", ("robertson", "lucene", "atire", "bm25l", "bm25+")),
}
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
    values: list[Any] | None = None  # None: continuous (optuna only)
    low: float | None = None
    high: float | None = None
    step: float | None = None

    def suggest(self, trial: Any) -> Any:
        if self.kind in ("bool", "choice") or (self.values is not None and self.step is None):
            return trial.suggest_categorical(self.name, list(self.values or []))
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1))
        v = trial.suggest_float(self.name, float(self.low), float(self.high), step=self.step)
        return round(v, 10) if self.step else v  # grid values, not 0.30000000000000004


def _field_kind(name: str) -> tuple[str, Any]:
    """(kind, range or choices) of a PipelineParams field or index param."""
    from rag_lab.types.params import PipelineParams

    if name in INDEX_PARAMS:
        return INDEX_PARAMS[name]
    fields = PipelineParams.model_fields
    if name not in fields:
        close = [f for f in fields if name.split("_")[0] in f][:5]
        hint = f"; similar: {', '.join(close)}" if close else ""
        raise SweepError(f"--param {name}: not a PipelineParams field nor one of {', '.join(INDEX_PARAMS)}{hint}")
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


def _check_range(name: str, v: float, rng: Any, where: str) -> None:
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
        vals: list[Any] = []
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
            values: list[Any] = [int(lo + i * step) for i in range(n)]
        else:
            values = [round(lo + i * step, 10) for i in range(n)]
            hi = values[-1]  # optuna needs (high - low) to be a multiple of step
        return ParamSpace(name, kind, values, lo, hi, step)
    vals = [_number(x.strip(), kind, where) for x in body.split(",") if x.strip()]
    for v in vals:
        _check_range(name, v, rng, where)
    return ParamSpace(name, kind, list(dict.fromkeys(vals)))


def grid_configs(spaces: Sequence[ParamSpace]) -> list[dict[str, Any]]:
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
    prefix, _, k = objective.partition("@")
    if objective in ("mrr", "map") or (
        prefix in ("recall", "precision", "hit", "ndcg", "mrr") and k.isdigit() and int(k) > 0
    ):
        return "maximize"
    raise SweepError(
        f"unknown objective {objective!r}: use a retrieval metric (ndcg@10, recall@5, mrr, map, …), "
        f"an offline ragas metric ({', '.join(OFFLINE_METRICS)}) or latency_ms"
    )


# --------------------------------------------------------------------------- result


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class SweepResult:
    """One row per evaluated config: its values, suite-mean metrics, latency, failures."""

    param_names: list[str]
    objective: str
    direction: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    base_params: dict[str, Any] = field(default_factory=dict)
    suites: list[str] = field(default_factory=list)
    cache_stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_csv(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        self.frame().to_csv(p, index=False)
        return p

    def best(self) -> dict[str, Any]:
        """The best row by the objective (NaN rows never win; ties: first evaluated)."""
        ok = [r for r in self.rows if _finite(r.get(self.objective))]
        if not ok:
            raise SweepError(f"no config has a finite {self.objective}")
        sign = 1 if self.direction == "maximize" else -1
        return max(ok, key=lambda r: (sign * r[self.objective], -r["config_index"]))

    def best_config(self) -> dict[str, Any]:
        b = self.best()
        return {k: b[k] for k in self.param_names}

    def export_best_yaml(self, path: str | Path) -> Path:
        """``params:`` = the sweep's base overrides plus the best config (PipelineParams fields only;
        index settings go in a comment), loadable by ``PipelineParams.from_yaml``."""
        import yaml

        from rag_lab.types.params import PipelineParams

        best = self.best()
        cfg = {**self.base_params, **self.best_config()}
        params = {k: v for k, v in cfg.items() if k not in INDEX_PARAMS}
        index = {k: v for k, v in cfg.items() if k in INDEX_PARAMS}
        PipelineParams.from_mapping(params, source="best config")  # validate before writing
        header = [
            f"# best of {len(self.rows)} configs by {self.objective} ({self.direction}) = {best[self.objective]:.6f}",
            f"# suites: {', '.join(self.suites)}; mean latency {best['latency_ms']:.1f} ms",
        ]
        if index:
            header.append(f"# KB index settings (not PipelineParams): {index}")
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(header) + "\n" + yaml.safe_dump({"params": params}, sort_keys=True), encoding="utf-8")
        return p

    def pareto_front(self, quality: str | None = None, cost: str = "latency_ms") -> list[dict[str, Any]]:
        """Rows not dominated in (higher quality, lower cost), by increasing cost."""
        q = quality or self.objective
        pts = [r for r in self.rows if math.isfinite(r.get(q, math.nan)) and math.isfinite(r.get(cost, math.nan))]
        pts.sort(key=lambda r: (r[cost], -r[q]))
        front: list[dict[str, Any]] = []
        best_q = -math.inf
        for r in pts:
            if r[q] > best_q:
                front.append(r)
                best_q = r[q]
        return front

    def plot_metric_vs_param(self, path: str | Path, metric: str | None = None) -> Path:
        """One panel per parameter: the metric of every config (dots) and its mean per value (line)."""
        from rag_lab.eval.report import _figure

        m = metric or self.objective
        names = self.param_names or ["config_index"]
        fig = _figure(4.2 * len(names), 3.4)
        axes = fig.subplots(1, len(names), squeeze=False)[0]
        for ax, name in zip(axes, names):
            xs = [r[name] for r in self.rows if math.isfinite(r.get(m, math.nan))]
            ys = [r[m] for r in self.rows if math.isfinite(r.get(m, math.nan))]
            numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
            labels = sorted(set(xs), key=lambda v: (str(type(v)), v)) if not numeric else None
            pos = (lambda v: v) if numeric else (lambda v: labels.index(v))  # type: ignore[union-attr]  # noqa: B023 (called within this iteration)
            ax.scatter([pos(x) for x in xs], ys, s=14, alpha=0.5, color="#4477aa")
            means: dict[Any, list[float]] = {}
            for x, y in zip(xs, ys):
                means.setdefault(x, []).append(y)
            keys = sorted(means, key=lambda v: pos(v))
            ax.plot(
                [pos(k) for k in keys],
                [sum(means[k]) / len(means[k]) for k in keys],
                color="#cc3311",
                marker="o",
                label="mean over other params",
            )
            if not numeric and labels is not None:
                ax.set_xticks(range(len(labels)), [str(v) for v in labels])
            ax.set_xlabel(name)
            ax.set_ylabel(m)
            ax.legend(fontsize=7)
        fig.suptitle(f"{m} vs parameter ({len(self.rows)} configs)")
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, format="png", bbox_inches="tight")
        return p

    def plot_pareto(self, path: str | Path, quality: str | None = None, cost: str = "latency_ms") -> Path:
        """Quality vs latency for every config, the Pareto front joined, the best config marked."""
        from rag_lab.eval.report import _figure

        q = quality or self.objective
        fig = _figure(6.0, 4.2)
        ax = fig.subplots()
        pts = [r for r in self.rows if math.isfinite(r.get(q, math.nan)) and math.isfinite(r.get(cost, math.nan))]
        ax.scatter([r[cost] for r in pts], [r[q] for r in pts], s=16, color="#999999", label="configs")
        front = self.pareto_front(q, cost)
        ax.plot([r[cost] for r in front], [r[q] for r in front], color="#cc3311", marker="o", label="Pareto front")
        if q == self.objective and pts:
            b = self.best()
            ax.scatter([b[cost]], [b[q]], s=90, facecolors="none", edgecolors="black", label="best")
        ax.set_xlabel(f"{cost} (mean per question, as run)")
        ax.set_ylabel(q)
        ax.set_title(f"{q} vs {cost}")
        ax.legend(fontsize=8)
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, format="png", bbox_inches="tight")
        return p

    def markdown(self, top: int = 10) -> str:
        metrics = [self.objective, "latency_ms", "errors", "fallbacks"]
        sign = -1 if self.direction == "maximize" else 1
        rows = sorted(
            self.rows,
            key=lambda r: (
                sign * r.get(self.objective, math.nan) if math.isfinite(r.get(self.objective, math.nan)) else math.inf
            ),
        )
        head = self.param_names + metrics
        lines = [
            f"# Sweep: {self.objective} ({self.direction})",
            "",
            f"{len(self.rows)} configs on {', '.join(self.suites)} in {self.seconds:.1f} s; "
            f"base params {self.base_params or 'lab defaults'}; stage cache {self.cache_stats or 'off'}.",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for r in rows[:top]:
            lines.append(
                "| " + " | ".join(f"{r[h]:.4f}" if isinstance(r.get(h), float) else str(r.get(h)) for h in head) + " |"
            )
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- running


@dataclass
class _Suite:
    name: str
    dataset: Dataset
    kb: str


def _split(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    params = {k: v for k, v in config.items() if k not in INDEX_PARAMS}
    index = {k: v for k, v in config.items() if k in INDEX_PARAMS}
    return params, index


class _Evaluator:
    """Evaluates configs on the suites (shared by grid and optuna)."""

    def __init__(
        self,
        lab: Lab,
        suites: Sequence[_Suite],
        objective: str,
        ks: Sequence[int],
        ragas_metrics: Sequence[str],
        base_params: Mapping[str, Any],
        cache_dir: str | Path | None,
        pbar: Any,
    ) -> None:
        from rag_lab.eval.ragas_adapter import OFFLINE_METRICS

        self.lab, self.suites, self.objective, self.ks = lab, list(suites), objective, tuple(ks)
        metrics = list(ragas_metrics)
        if objective in OFFLINE_METRICS and objective not in metrics:
            metrics.append(objective)
        self.ragas_metrics = metrics
        self.base_params = dict(base_params)
        self.pbar = pbar
        self.handle = None
        self.own_handle = False
        self.bm25_cache = None
        if cache_dir is not None:
            from rag_lab.eval.cache import Bm25IndexCache, enable_stage_cache

            already = getattr(lab, "_stage_cache_handle", None)
            self.handle = enable_stage_cache(lab, cache_dir)
            self.own_handle = self.handle is not already
            self.bm25_cache = Bm25IndexCache(self.handle.cache)
        self.rows: list[dict[str, Any]] = []

    def _apply_index(self, index: Mapping[str, Any]) -> None:
        if not index:
            return
        if self.bm25_cache is None:
            from rag_lab.eval.cache import Bm25IndexCache, StageCache

            self.bm25_cache = Bm25IndexCache(StageCache(Path(self.lab.workspace.root) / "stage_cache"))
        from rag_lab.eval.cache import use_bm25_settings

        s = {**_DEFAULT_BM25, **index}
        for suite in self.suites:
            use_bm25_settings(
                self.lab,
                suite.kb,
                self.bm25_cache,
                k1=float(s["bm25_k1"]),
                b=float(s["bm25_b"]),
                method=str(s["bm25_method"]),
            )

    def close(self, restore_index: bool) -> None:
        """Undo what the sweep changed on the lab (stage cache it enabled, swapped BM25 indexes)."""
        if restore_index:
            self.restore_index()
        if self.handle is not None and self.own_handle:
            self.handle.disable()

    def restore_index(self) -> None:
        """Drop the swapped BM25 indexes so the KBs' own are loaded again."""
        ws = self.lab.workspace
        for suite in self.suites:
            kb = ws.get_kb(suite.kb)
            with ws._lock:
                ws._kw.pop(kb.id, None)

    async def warm_up(self, config: Mapping[str, Any]) -> None:
        """Run ``config`` once unrecorded, so the stage cache is filled before latencies are timed
        (otherwise the first config would carry every cache miss)."""
        from rag_lab.eval.runner import evaluate_lab

        params, index = _split({**self.base_params, **config})
        self._apply_index(index)
        p = self.lab.params.with_changes(**params)
        for suite in self.suites:
            await evaluate_lab(self.lab, suite.dataset, suite.kb, ks=self.ks, progress=False, params=p, keep_runs=False)

    async def evaluate(self, config: Mapping[str, Any]) -> dict[str, Any]:
        from rag_lab.eval.runner import evaluate_lab

        params, index = _split({**self.base_params, **config})
        try:
            p = self.lab.params.with_changes(**params)
        except ValueError as exc:
            raise SweepError(f"config {dict(config)}: {exc}") from None
        self._apply_index(index)
        row: dict[str, Any] = {"config_index": len(self.rows), **dict(config)}
        per_metric: dict[str, list[float]] = {}
        latencies: list[float] = []
        costs: list[float] = []
        tokens: list[float] = []
        errors = fallbacks = nan_samples = 0
        first_error = ""
        for suite in self.suites:
            res = await evaluate_lab(
                self.lab, suite.dataset, suite.kb, ks=self.ks, progress=False, params=p, keep_runs=False, pbar=self.pbar
            )
            summ = dict(res.summary())
            if self.ragas_metrics:
                from rag_lab.eval.ragas_adapter import ascore_samples, samples_from_records

                rr = await ascore_samples(samples_from_records(res.records, suite.dataset), self.ragas_metrics)
                summ.update(rr.summary())
                nan_samples += sum(c["n_nan"] + c["n_failed"] for c in rr.counts().values())
            for k, v in summ.items():
                per_metric.setdefault(k, []).append(v)
                if len(self.suites) > 1:
                    row[f"{suite.name}:{k}"] = v
            latencies += [r.latency_ms for r in res.records if not r.error]
            costs += [r.cost_usd for r in res.records]
            tokens += [r.tokens_in + r.tokens_out for r in res.records]
            errors += res.errors
            first_error = first_error or next((f"{r.qid}: {r.error}" for r in res.records if r.error), "")
            fallbacks += res.fallbacks
        for k, vs in per_metric.items():
            row[k] = sum(vs) / len(vs) if all(math.isfinite(v) for v in vs) else math.nan
        lat = sorted(latencies)
        row["latency_ms"] = sum(lat) / len(lat) if lat else math.nan
        row["p95_latency_ms"] = lat[min(len(lat) - 1, int(math.ceil(0.95 * len(lat))) - 1)] if lat else math.nan
        # the trial's ledger, per question (the quality-vs-cost Pareto plot reads cost_usd)
        row["cost_usd"] = sum(costs) / len(costs) if costs else math.nan
        row["tokens"] = sum(tokens) / len(tokens) if tokens else math.nan
        row["errors"] = errors
        row["fallbacks"] = fallbacks
        row["nan_samples"] = nan_samples
        row["first_error"] = first_error
        if self.objective not in row:
            raise SweepError(
                f"objective {self.objective!r} is not among the computed metrics "
                f"({', '.join(k for k in row if not k.startswith('config'))})"
            )
        self.rows.append(row)
        return row

    def stats(self) -> dict[str, Any]:
        if self.handle is None:
            return {}
        return {k: {"hits": v.hits, "misses": v.misses} for k, v in self.handle.stats().items()}


def _prepare(lab: Lab, suites: Iterable[Any]) -> list[_Suite]:
    """Suites as (spec or (dataset, kb)); specs are loaded and ingested."""
    from rag_lab.eval.runner import SuiteSpec, ingest_dataset

    out: list[_Suite] = []
    for s in suites:
        if isinstance(s, SuiteSpec):
            ds = s.load()
            ingest_dataset(lab, ds, s.kb_name)
            out.append(_Suite(s.name, ds, s.kb_name))
        else:
            ds, kb = s
            out.append(_Suite(ds.name, ds, kb))
    if not out:
        raise SweepError("a sweep needs at least one dataset")
    return out


def _bar(total: int, progress: bool, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="q", disable=not progress, smoothing=0.1)


async def run_grid(
    lab: Lab,
    suites: Iterable[Any],
    spaces: Sequence[ParamSpace],
    objective: str = "ndcg@10",
    *,
    ks: Sequence[int] = (1, 3, 5, 10),
    ragas_metrics: Sequence[str] = (),
    base_params: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> SweepResult:
    """Evaluate every grid config; ``suites`` are SuiteSpecs or ``(dataset, kb)`` pairs (already
    ingested). ``cache_dir=None`` runs without the stage cache."""
    direction = objective_direction(objective)
    configs = grid_configs(spaces)
    prepared = _prepare(lab, suites)
    n_q = sum(len(s.dataset.queries) for s in prepared)
    t0 = time.perf_counter()
    bar = _bar(len(configs) * n_q, progress, f"sweep {len(configs)} configs")
    ev = _Evaluator(lab, prepared, objective, ks, ragas_metrics, base_params or {}, cache_dir, bar)
    try:
        if cache_dir is not None and configs:
            bar.set_description_str("sweep: filling the stage cache")
            await ev.warm_up(configs[0])
            bar.set_description_str(f"sweep {len(configs)} configs")
        for cfg in configs:
            row = await ev.evaluate(cfg)
            bar.set_postfix_str(f"{objective}={row[objective]:.4f}", refresh=False)
    finally:
        bar.close()
        stats = ev.stats()
        ev.close(any(s.name in INDEX_PARAMS for s in spaces))
    return SweepResult(
        [s.name for s in spaces],
        objective,
        direction,
        ev.rows,
        dict(base_params or {}),
        [s.name for s in prepared],
        stats,
        time.perf_counter() - t0,
    )


async def run_optuna(
    lab: Lab,
    suites: Iterable[Any],
    spaces: Sequence[ParamSpace],
    n_trials: int,
    objective: str = "ndcg@10",
    *,
    seed: int = 0,
    ks: Sequence[int] = (1, 3, 5, 10),
    ragas_metrics: Sequence[str] = (),
    base_params: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> SweepResult:
    """``n_trials`` configs chosen by optuna's TPE sampler (seeded), evaluated like the grid."""
    try:
        import optuna
    except ImportError:
        raise SweepError("optuna is not installed: pip install 'rag_lab[eval]' (or pip install optuna)") from None
    if n_trials < 1:
        raise SweepError(f"--optuna-trials must be >= 1, got {n_trials}")
    direction = objective_direction(objective)
    prepared = _prepare(lab, suites)
    n_q = sum(len(s.dataset.queries) for s in prepared)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(seed=seed))
    t0 = time.perf_counter()
    bar = _bar(n_trials * n_q, progress, f"optuna {n_trials} trials")
    ev = _Evaluator(lab, prepared, objective, ks, ragas_metrics, base_params or {}, cache_dir, bar)
    try:
        for i in range(n_trials):
            trial = study.ask()
            cfg = {s.name: s.suggest(trial) for s in spaces}
            if i == 0 and cache_dir is not None:
                await ev.warm_up(cfg)
            row = await ev.evaluate(cfg)
            value = row[objective]
            if math.isfinite(value):
                study.tell(trial, value)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            bar.set_postfix_str(f"{objective}={value:.4f}", refresh=False)
    finally:
        bar.close()
        stats = ev.stats()
        ev.close(any(s.name in INDEX_PARAMS for s in spaces))
    return SweepResult(
        [s.name for s in spaces],
        objective,
        direction,
        ev.rows,
        dict(base_params or {}),
        [s.name for s in prepared],
        stats,
        time.perf_counter() - t0,
    )


def write_sweep_outputs(result: SweepResult, out_dir: str | Path, name: str = "sweep") -> dict[str, Path]:
    """CSV, metric-vs-param and Pareto PNGs, best-config YAML and a Markdown summary."""
    out = Path(out_dir)
    paths = {
        "csv": result.to_csv(out / f"{name}.csv"),
        "metric_vs_param": result.plot_metric_vs_param(out / f"{name}_metric_vs_param.png"),
        "pareto": result.plot_pareto(out / f"{name}_pareto.png"),
        "best_yaml": result.export_best_yaml(out / f"{name}_best.yaml"),
    }
    md = out / f"{name}.md"
    md.write_text(
        result.markdown() + f"\n![metric vs parameter]({paths['metric_vs_param'].name})\n\n"
        f"![Pareto]({paths['pareto'].name})\n",
        encoding="utf-8",
    )
    paths["md"] = md
    return paths
