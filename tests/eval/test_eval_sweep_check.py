"""``rag-lab sweep --check``: the audit that re-runs configs of a fast sweep through the full
pipeline. Which configs it re-runs (none by default, the N best by the objective, or all), how it
says so, the values it refuses, and :meth:`FastSweep.verify` comparing ids, texts, scores and
metrics and failing on every disagreement among the configs it re-ran."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pytest

from rag_lab.eval.records import QueryRecord
from rag_lab.eval.sweep import SweepError
from rag_lab.eval.sweep.fast import FastSweep, check_description

# --------------------------------------------------------------------------- a fake pipeline


@dataclass
class _Res:
    records: list[QueryRecord]
    metrics: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        return dict(self.metrics)


@dataclass
class _Suite:
    name: str = "s"


class _Ev:
    """The parts of the sweep's evaluator that :class:`FastSweep` uses to check: config ``i``
    scores ``scores[i]``; the pipeline disagrees with the fast path on the configs in ``bad``."""

    def __init__(
        self, scores: list[float], bad: set[int], score_only: bool = False, objective: str = "ndcg@10"
    ) -> None:
        self.objective = objective
        self.rows: list[dict[str, Any]] = [{"latency_ms": 1.0, "evaluated_by": "fast", objective: s} for s in scores]
        self.bad, self.score_only = bad, score_only
        self.pipeline_runs: list[int] = []

    async def pipeline_results(self, config: dict[str, Any]) -> list[tuple[_Suite, _Res]]:
        i = int(config["i"])
        self.pipeline_runs.append(i)
        rec = _record(i)
        if i in self.bad:
            if self.score_only:
                rec.context_scores = [rec.context_scores[0] * (1 + 1e-6), *rec.context_scores[1:]]
            else:
                rec.context_ids = rec.context_ids[:-1]
        return [(_Suite(), _Res([rec], {self.objective: self.rows[i][self.objective]}))]


def _record(i: int) -> QueryRecord:
    return QueryRecord(
        "q1", "?", ["d1"], [], ["d1", "d2"], [f"c{i}", "c9"], ["d1", "d2"], ["a", "b"], context_scores=[0.8, 0.5]
    )


def _sweep(
    n: int, bad: Collection[int] = (), check: int | str = 0, scores: list[float] | None = None, **kw: Any
) -> tuple[FastSweep, _Ev]:
    """``n`` configs scored 0.50, 0.51, … (the last is the best) unless ``scores`` are given."""
    ev = _Ev(scores if scores is not None else [0.5 + 0.01 * i for i in range(n)], set(bad), **kw)
    fs = FastSweep(ev, check=check)  # type: ignore[arg-type]
    for i in range(len(ev.rows)):
        fs.fast_records[i] = ({"i": i}, [(_Suite(), _Res([_record(i)], {ev.objective: ev.rows[i][ev.objective]}))])
    return fs, ev


def _described(fs: FastSweep) -> str:
    return check_description(len(fs.checked), fs.n_configs)


# --------------------------------------------------------------------------- which configs


def test_check_0_runs_nothing_on_the_pipeline() -> None:
    fs, ev = _sweep(6, bad={5})  # a disagreement on the best config, not looked for
    assert asyncio.run(fs.verify()) == []
    assert ev.pipeline_runs == [] and fs.checked == []
    assert {r["evaluated_by"] for r in ev.rows} == {"fast"}
    assert _described(fs) == "none (--check 0)"
    assert FastSweep(ev).check == 0  # type: ignore[arg-type]  # the default


def test_check_2_reruns_exactly_the_2_best() -> None:
    fs, ev = _sweep(6, check=2)
    assert asyncio.run(fs.verify()) == [4, 5]
    assert sorted(ev.pipeline_runs) == [4, 5]
    assert [r["evaluated_by"] for r in ev.rows] == ["fast"] * 4 + ["fast, checked"] * 2
    assert _described(fs) == "the 2 best of 6 configs"


def test_the_best_by_the_objective_nan_last_ties_by_index() -> None:
    scores = [0.3, math.nan, 0.9, 0.5, 0.9, 0.1]
    fs, _ = _sweep(6, check=3, scores=scores)
    assert fs.select(fs.ev.rows) == [2, 3, 4]
    fs, _ = _sweep(6, check=1, scores=scores)
    assert fs.select(fs.ev.rows) == [2]  # of two at 0.9, the first
    fs, _ = _sweep(6, check=6, scores=scores)
    assert fs.select(fs.ev.rows) == [0, 1, 2, 3, 4, 5]  # the NaN one too, when N reaches it
    low, ev = _sweep(6, check=2, scores=[40.0, 10.0, math.nan, 30.0, 20.0, 50.0], objective="latency_ms")
    assert asyncio.run(low.verify()) == [1, 4]  # minimised: the lowest latencies
    assert sorted(ev.pipeline_runs) == [1, 4]


def test_check_all_reruns_every_config() -> None:
    fs, ev = _sweep(6, check="all")
    assert asyncio.run(fs.verify()) == [0, 1, 2, 3, 4, 5]
    assert sorted(ev.pipeline_runs) == [0, 1, 2, 3, 4, 5]
    assert {r["evaluated_by"] for r in ev.rows} == {"fast, checked"}
    assert _described(fs) == "all 6 configs"
    more, ev = _sweep(3, check=5)  # N beyond the grid: every config, once
    assert asyncio.run(more.verify()) == [0, 1, 2] and sorted(ev.pipeline_runs) == [0, 1, 2]
    assert _described(more) == "all 3 configs"


def test_what_was_rechecked_in_words() -> None:
    assert check_description(3, 540) == "the 3 best of 540 configs"
    assert check_description(1, 540) == "the best of 540 configs"
    assert check_description(27, 27) == "all 27 configs"
    assert check_description(0, 27) == "none (--check 0)"
    assert check_description(1, 1) == "the only config"


@pytest.mark.parametrize("bad", [-1, "x", "auto", "3", True, 1.5, None])
def test_bad_check_values_are_refused_naming_the_flag(bad: Any) -> None:
    ev = _Ev([0.5], set())
    with pytest.raises(SweepError, match=r"^--check must be 'all' or an integer >= 0, got "):
        FastSweep(ev, check=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["-1", "x", "auto", "2.5", "", "³"])
def test_the_cli_refuses_bad_check_values_naming_the_flag(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    with pytest.raises(SystemExit) as exc:
        main(["sweep", "--dataset", "hotpotqa_hipporag100:2:10", "--param", "mmr_lambda=0.5", "--check", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --check: --check {bad!r}: use N >= 0 (re-run the N best configs) or 'all'" in err


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("2", 2), (" 12 ", 12), ("all", "all"), ("ALL", "all")])
def test_the_cli_reads_check_values(text: str, value: int | str) -> None:
    from rag_lab.commands.sweep import _check_arg

    assert _check_arg(text) == value


def test_the_cli_has_no_sampling_options(capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    for gone in ("--check-share", "--check-miss"):
        with pytest.raises(SystemExit):
            main(["sweep", "--dataset", "hotpotqa_hipporag100:2:10", "--param", "mmr_lambda=0.5", gone, "0.1"])
        assert f"unrecognized arguments: {gone}" in capsys.readouterr().err


# --------------------------------------------------------------------------- disagreements


def test_a_disagreement_on_a_checked_config_fails_naming_config_question_and_field() -> None:
    fs, ev = _sweep(6, bad={4, 5}, check=2)
    with pytest.raises(SweepError) as exc:
        asyncio.run(fs.verify())
    msg = str(exc.value)
    assert msg.startswith("fast evaluator and pipeline disagree on 2 of 2 checked configs (nothing written):\n")
    assert "config {'i': 4}: s question q1: context_ids ['c4'] (pipeline) vs ['c4', 'c9'] (fast)" in msg
    assert "config {'i': 5}: s question q1: context_ids ['c5'] (pipeline) vs ['c5', 'c9'] (fast)" in msg
    assert sorted(ev.pipeline_runs) == [4, 5]


def test_a_disagreement_is_caught_only_where_it_is_checked() -> None:
    """Config 1 disagrees: ``--check 2`` re-runs the best two (4, 5) and passes; ``--check 5``
    reaches it and fails; so does ``--check all``."""
    fs, _ = _sweep(6, bad={1}, check=2)
    assert asyncio.run(fs.verify()) == [4, 5]
    for check in (5, "all"):
        fs, _ = _sweep(6, bad={1}, check=check)
        with pytest.raises(
            SweepError, match=r"disagree on 1 of \d checked configs .*\n  config \{'i': 1\}: s question q1"
        ):
            asyncio.run(fs.verify())


def test_scores_are_compared_within_the_tolerance() -> None:
    fs, _ = _sweep(6, {5}, check="all", score_only=True)  # 1e-6 relative: a difference
    with pytest.raises(SweepError, match=r"config \{'i': 5\}: s question q1: context_scores \[0\.8000008"):
        asyncio.run(fs.verify())
    noise, _ = _sweep(3, check="all")  # one ulp: the same
    rec = noise.fast_records[0][1][0][1].records[0]
    rec.context_scores = [math.nextafter(rec.context_scores[0], 1.0), rec.context_scores[1]]
    assert asyncio.run(noise.verify()) == [0, 1, 2]


def test_metrics_are_compared() -> None:
    fs, ev = _sweep(3, check=1)
    ev.rows[2]["ndcg@10"] = 0.9  # the pipeline reports this; the fast records say 0.52
    with pytest.raises(SweepError, match=r"config \{'i': 2\}: s metrics: \{'ndcg@10': 0\.9\} \(pipeline\) vs"):
        asyncio.run(fs.verify())
