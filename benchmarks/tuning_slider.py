"""Live tuning panel: redraw time per slider change (metric table + metric-vs-parameter plot, SVG) on a
HotpotQA slice, from the captured inputs (no pipeline, no model).

Usage: .venv/bin/python benchmarks/tuning_slider.py [N_QUESTIONS] [MAX_DOCS] [CHANGES]

The panel (``rag_lab.lab.tuning_widget.TuningPanel``) is built on the slice (capture: one pipeline
run per question, timed separately); then each slider is moved step by step as a hand drags it
(``continuous_update``), ``CHANGES`` changes per slider. Two figures per change, both including
the PNG render of the plot: the first change of a slider after another moved (its curve along the
slider, 9 points, is computed) and the following changes of the same slider (curve cached, one
config evaluated). Printed as p50 / p95 / max in ms; the goal is < 200 ms per change.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

from rag_lab.eval.runner import SuiteSpec, ingest_dataset
from rag_lab.lab import Lab
from rag_lab.lab.tuning_widget import tuning_panel


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    max_docs = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    changes = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    spec = SuiteSpec("hotpotqa_hipporag100", n, max_docs)
    ds = spec.load()
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab.from_config(workspace=tmp)
        t0 = time.perf_counter()
        ingest_dataset(lab, ds, spec.kb_name)
        ingest_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        panel = tuning_panel(lab, ds, spec.kb_name, n_questions=n)
        build_s = time.perf_counter() - t0
        first: list[float] = []
        same: list[float] = []
        for name, slider in panel.sliders.items():
            step = slider.step
            value = slider.value
            for i in range(changes):
                value = min(slider.max, value + step) if value + step <= slider.max else max(slider.min, value - step)
                ms = panel.set(name, value)
                (first if i == 0 else same).append(ms)
    print(
        f"HotpotQA slice: {len(ds.queries)} questions, {len(ds.corpus)} documents (ingest {ingest_s:.1f} s); "
        f"panel built in {build_s:.1f} s (capture + first draw); {len(panel.sliders)} sliders × {changes} changes"
    )
    for label, xs in (("first change of a slider (curve computed)", first), ("next changes (curve cached)", same)):
        print(f"  {label:<44} p50 {statistics.median(xs):7.1f} ms  p95 {_pct(xs, 0.95):7.1f} ms  max {max(xs):7.1f} ms")
    print(
        f"slider redraw: first change {statistics.median(first):.0f} ms, next changes {statistics.median(same):.0f} "
        f"ms (p50, {len(ds.queries)} questions; goal < 200 ms)"
    )
    print("best so far:\n" + panel.best_yaml())


if __name__ == "__main__":
    main()
