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
between the two snapshot modes. Both ``bare`` and the lab run on ``rag_lab.asyncutil.run_sync``
(what ``lab.ask`` uses), so the loop's own start and end are in neither's overhead.

Then one more round of ``ask, no snapshots`` with timers around the parts of ``lab.ask`` that
``bare`` does not do, to say where its overhead goes (ms per run, medians): the session (the
session row and the user message before the run, the assistant message and §9.1 after it), the
ledger (token estimates and records in the model wrappers), the stored events read back, the
warnings. Last, the event loop itself: ``run_sync`` vs ``asyncio.run`` of a coroutine that sends
four calls to threads, as a run does.
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

import rag_lab.lab.lab as lab_module
import rag_lab.observability.ledger as ledger_module
import rag_lab.pipeline.knobs as knobs_module
import rag_lab.searchutil.language as language_module
from rag_lab.asyncutil import run_sync
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
                        stages_seen = run_sync(lambda q=q: bare(q))
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
        parts = _ask_parts(lab, questions)
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
    print(f"where 'ask, no snapshots' spends it, ms/run (p50 over {len(questions)} runs):")
    for name, values in parts.items():
        print(f"  {name:<58}{statistics.median(values) * 1000:>8.3f}")
    loop_run_sync, loop_asyncio_run = _loop_cost()
    print(
        f"event loop per call (start, 4 calls sent to threads, end): run_sync {loop_run_sync * 1000:.3f} ms "
        f"vs asyncio.run {loop_asyncio_run * 1000:.3f} ms"
    )


_PARTS = (
    ("session: session row + user message (before the run)", lab_module.Lab, "_open_turn"),
    ("session: assistant message + §9.1 (after the run)", lab_module.Lab, "_remember_turn"),
    ("ledger: token estimates (model wrappers)", ledger_module, "estimate_tokens"),
    ("ledger: records", ledger_module.Ledger, "record"),
    ("events: stored stream events read back", None, "get_events"),
    ("warnings: knobs and language", knobs_module, "run_warnings"),
    ("warnings: knobs and language", language_module, "language_warning"),
)


def _ask_parts(lab: Lab, questions: list[str]) -> dict[str, list[float]]:
    """One round of ``lab.ask(snapshots=False)`` with timers around the parts bare does not do."""
    spent: dict[str, float] = defaultdict(float)
    saved = []

    def timed(name: str, fn: Any) -> Any:
        if asyncio.iscoroutinefunction(fn):

            async def atimer(*a: Any, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await fn(*a, **kw)
                finally:
                    spent[name] += time.perf_counter() - t0

            return atimer

        def timer(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] += time.perf_counter() - t0

        return timer

    for name, owner, attr in _PARTS:
        target = owner if owner is not None else type(lab.stream_manager)
        if hasattr(target, attr):
            saved.append((target, attr, getattr(target, attr)))
            setattr(target, attr, timed(name, getattr(target, attr)))
    out: dict[str, list[float]] = defaultdict(list)
    try:
        for q in questions:
            spent.clear()
            lab.ask(q, kb=KB, snapshots=False)
            for name, _, _ in _PARTS:
                out[name].append(spent.get(name, 0.0))
    finally:
        for target, attr, fn in reversed(saved):
            setattr(target, attr, fn)
    return out


def _loop_cost(rounds: int = 200) -> tuple[float, float]:
    async def work() -> None:
        await asyncio.gather(*(asyncio.to_thread(time.sleep, 0.0005) for _ in range(3)))
        await asyncio.to_thread(lambda: None)

    a: list[float] = []
    b: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        run_sync(work)
        t1 = time.perf_counter()
        asyncio.run(work())
        t2 = time.perf_counter()
        a.append(t1 - t0)
        b.append(t2 - t1)
    return statistics.median(a), statistics.median(b)


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
