"""The result of a sweep (:class:`SweepResult`: rows, best config, tables, CSV and YAML); its plots
and the whole set of files are drawn and written by :mod:`rag_lab.lab.outputs`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.eval.sweep.specs import INDEX_PARAMS, SweepError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


# --------------------------------------------------------------------------- result


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass
class SweepResult:
    """One row per evaluated config: its values, suite-mean metrics, latency, failures."""

    param_names: list[str]
    objective: str
    direction: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    base_params: dict[str, object] = field(default_factory=dict)
    suites: list[str] = field(default_factory=list)
    cache_stats: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    #: the held-out check of ``--holdout`` (:class:`rag_lab.eval.sweep.holdout.HoldoutResult` as a dict)
    holdout: dict[str, Any] | None = None

    @property
    def warnings(self) -> list[str]:
        """Swept params that could not change anything (rag_lab.pipeline.knobs): values that gave
        the same contexts for every question (``contexts_digest``), RRF weights at 0."""
        from rag_lab.pipeline.knobs import param_warnings, sweep_warnings
        from rag_lab.types.params import PipelineParams

        out = sweep_warnings(
            [n for n in self.param_names if n not in INDEX_PARAMS],
            self.rows,
            {r["config_index"]: r.get("contexts_digest") for r in self.rows if r.get("contexts_digest")},
        )
        swept = set(self.param_names)
        for r in self.rows:
            cfg = {k: v for k, v in {**self.base_params, **r}.items() if k in PipelineParams.model_fields}
            try:
                p = PipelineParams.from_mapping(cfg)
            except ValueError:
                continue
            for w in param_warnings(p, swept & set(cfg)):
                if str(w) not in out:
                    out.append(str(w))
        return out

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

    def export_best_yaml(self, path: str | Path, *, tuned: bool = True) -> Path:
        """``params:`` = the sweep's base overrides plus the best config (PipelineParams fields only;
        index settings go in a comment), loadable by ``PipelineParams.from_yaml``. ``tuned=False``
        writes the default config (the base overrides alone), with the reason in the header: what
        ``<name>_best.yaml`` holds when the held-out check did not find the tuned config better."""
        import yaml

        from rag_lab.types.params import PipelineParams

        best = self.best()
        cfg = {**self.base_params, **(self.best_config() if tuned else {})}
        params = {k: v for k, v in cfg.items() if k not in INDEX_PARAMS}
        index = {k: v for k, v in cfg.items() if k in INDEX_PARAMS}
        PipelineParams.from_mapping(params, source="best config")  # validate before writing
        if tuned:
            header = [
                f"# best of {len(self.rows)} configs by {self.objective} ({self.direction}) = {best[self.objective]:.6f}",
                f"# suites: {', '.join(self.suites)}; mean latency {best['latency_ms']:.1f} ms",
            ]
        else:
            verdict = (self.holdout or {}).get("verdict", "not better")
            header = [
                f"# the default config: the sweep's best of {len(self.rows)} configs by {self.objective} was "
                f"{verdict} than the default on held-out questions",
                f"# tuned: {', '.join(f'{k}={v}' for k, v in self.best_config().items())}",
            ]
        if index:
            header.append(f"# KB index settings (not PipelineParams): {index}")
        if self.holdout:
            header.append(f"# {self.holdout['line']}")
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
        warnings = self.warnings
        if warnings:
            lines += ["", "**Knobs that changed nothing:**", ""] + [f"- {w}" for w in warnings]
        if "latency_of" in (self.rows[0] if self.rows else {}):
            kinds = sorted({str(r.get("latency_of")) for r in self.rows})
            lines += ["", "latency_ms: " + "; ".join(kinds) + " (see the CSV's latency_of, fast_eval_ms)"]
        if self.holdout:
            lines += ["", self.holdout["markdown"]]
        return "\n".join(lines) + "\n"
