"""``lab.ask`` overhead per stage beyond the stages' own work, and the snapshot cost per stage:
copy-on-write snapshots (planned from the stage contracts) vs a full deep copy per stage.

Usage: .venv/bin/python benchmarks/stage_overhead.py [N_QUESTIONS] [ROUNDS]

The bundled HotpotQA corpus with the offline models, warm (every question asked once first, so the
embedding cache holds the passages). Per question, interleaved in a rotating order:

* ``bare``: ``run_knowledge_qa`` on the lab's chat, manager and stream manager, with no stage hook,
  no ledger and no session messages: the stages' own work plus the orchestrator;
* ``ask, no snapshots``: ``lab.ask(snapshots=False)``;
* ``ask, copy-on-write``: ``lab.ask()`` (the default);
* ``ask, full copies``: ``lab.ask()`` with the snapshot plan switched off (a deep copy per stage,
  as before issue 11).

Overhead per stage = (mode − bare) / stages in the run, medians over the questions. The time
inside the snapshot hook is measured on its own too (per stage, and the final snapshot).
Snapshots are checked equal (``to_dict()``, generated ids and the prompt's clock line aside)
between the two snapshot modes.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from typing import Any

from rag_lab.eval.datasets import load_dataset
from rag_lab.lab import Lab
from rag_lab.pipeline.qa import run_knowledge_qa
from rag_lab.pipeline.snapshots import SnapshotTaker

KB = "hotpotqa"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    ds = load_dataset("hotpotqa_hipporag100")
    hook_s: dict[str, list[float]] = defaultdict(list)
    take = SnapshotTaker.take
    mode_now = [""]

    def timed_take(self: SnapshotTaker, event: Any, chat: Any) -> Any:
        t0 = time.perf_counter()
        out = take(self, event, chat)
        hook_s[mode_now[0]].append(time.perf_counter() - t0)
        return out

    SnapshotTaker.take = timed_take  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as ws:
        lab = Lab.from_config(workspace=ws)
        lab.ingest_documents([{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus], kb=KB, progress=False)
        questions = [q.question for q in ds.queries[:n]]
        for q in questions:  # warm-up: embedding cache, token caches, the event manager and plan
            lab.ask(q, kb=KB)
        plan = lab._snapshot_plan

        async def bare(q: str) -> int:
            chat = lab.new_chat(q, [KB], lab.params, "")
            chat.context.message_id = str(uuid.uuid4())
            outcome = await run_knowledge_qa(chat, lab.services, lab._manager, lab.stream_manager)
            return len(outcome.events)

        def ask(mode: str, q: str) -> int:
            mode_now[0] = mode
            lab._snapshot_plan = plan if mode != "ask, full copies" else None
            t0 = time.perf_counter()
            run = lab.ask(q, kb=KB, snapshots=mode != "ask, no snapshots")
            final[mode] = run
            final_s[mode].append(time.perf_counter() - t0)
            return len(run.stages)

        modes = ["bare", "ask, no snapshots", "ask, copy-on-write", "ask, full copies"]
        wall: dict[str, list[float]] = defaultdict(list)
        per_stage: dict[str, list[float]] = defaultdict(list)
        final: dict[str, Any] = {}
        final_s: dict[str, list[float]] = defaultdict(list)
        stages_seen = 0
        mismatches = 0
        for r in range(rounds):
            for qi, q in enumerate(questions):
                got: dict[str, float] = {}
                order = modes[(qi + r) % 4 :] + modes[: (qi + r) % 4]
                for mode in order:
                    t0 = time.perf_counter()
                    if mode == "bare":
                        stages_seen = asyncio.run(bare(q))
                    else:
                        stages_seen = ask(mode, q)
                    got[mode] = time.perf_counter() - t0
                    wall[mode].append(got[mode])
                for mode in modes[1:]:
                    per_stage[mode].append((got[mode] - got["bare"]) / stages_seen)
                cow, full = final["ask, copy-on-write"], final["ask, full copies"]
                for stage in cow.snapshots:
                    a, b = cow.snapshots[stage].to_dict(), full.snapshots[stage].to_dict()
                    mismatches += _differs(a, b, stage)
        lab._snapshot_plan = plan
        lab.workspace.close()

    print(f"{n} HotpotQA questions × {rounds} rounds, {stages_seen} stages per run, offline models, warm")
    print(f"{'mode':<24}{'p50 ms/run':>12}{'overhead ms/stage (p50)':>26}{'snapshot hook ms/stage':>25}")
    for mode in modes:
        hook = statistics.median(hook_s[mode]) * 1000 if hook_s.get(mode) else 0.0
        over = f"{statistics.median(per_stage[mode]) * 1000:.3f}" if mode in per_stage else "-"
        print(f"{mode:<24}{statistics.median(wall[mode]) * 1000:>12.2f}{over:>26}{hook:>25.3f}")
    cow_hook = statistics.mean(hook_s["ask, copy-on-write"])
    full_hook = statistics.mean(hook_s["ask, full copies"])
    print(
        f"snapshot hook mean: copy-on-write {cow_hook * 1000:.3f} ms vs full copies {full_hook * 1000:.3f} ms per stage"
    )
    print(
        f"full / copy-on-write snapshot cost = {full_hook / cow_hook:.1f}×; snapshots differing between modes: {mismatches}"
    )
    print(
        "lab.ask overhead per stage (copy-on-write): "
        f"{statistics.median(per_stage['ask, copy-on-write']) * 1000:.3f} ms/stage"
    )


_CLOCK = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
_IDS = {"id", "message_id", "user_message_id", "create_at", "created_at", "updated_at", "session_id"}


def _differs(a: Any, b: Any, path: str = "") -> int:
    """1 (and the first differing path printed) when two snapshot views differ beyond generated
    ids and timestamps."""
    if isinstance(a, dict) and isinstance(b, dict):
        return max((_differs(a.get(k), b.get(k), f"{path}.{k}") for k in set(a) | set(b) if k not in _IDS), default=0)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return max((_differs(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b))), default=0)
    if isinstance(a, str) and isinstance(b, str):  # the prompt's "Current time: ..." line
        a, b = _CLOCK.sub("<time>", a), _CLOCK.sub("<time>", b)
    if a != b:
        print(f"  differs at {path}: {str(a)[:80]!r} vs {str(b)[:80]!r}")
        return 1
    return 0


if __name__ == "__main__":
    main()
