"""The Lab: the facade a notebook or the CLI starts from (config, knowledge bases, models, params).

``lab.ask(question)`` runs the whole pipeline and returns a :class:`Run` with the answer, the
references, every stream event, per-stage timings and a ChatManage snapshot after every stage.

The Lab runs questions (ask, step, rerun); the rest of it lives by responsibility in sibling
modules: its config (:mod:`rag_lab.lab.config`), the wiring of its models, stores and services
(:mod:`rag_lab.lab.factory`), and the mixins it is assembled from: the request a run starts from
(:mod:`rag_lab.lab.run_request`), knowledge bases and ingestion (:mod:`rag_lab.lab.knowledge`),
the session's messages (:mod:`rag_lab.lab.turns`). Their public names are importable from here.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from rag_lab.lab.config import (
    CHAT_MODEL_ID,
    DEFAULT_CONFIG,
    PREPARE_CHOICES,
    RERANK_MODEL_ID,
    VECTOR_CACHE_ENV,
    LabConfigError,
    prepare_texts_for,
    read_config,
    vector_cache_from_config,
)
from rag_lab.lab.factory import wire_lab
from rag_lab.lab.knowledge import LabKnowledge
from rag_lab.lab.run_request import LabRequests
from rag_lab.lab.turns import LabTurns, ensure_owned_session
from rag_lab.pipeline.container import build_event_manager
from rag_lab.pipeline.orchestrator import StageTiming
from rag_lab.pipeline.qa import QAOutcome, run_knowledge_qa
from rag_lab.pipeline.snapshots import SnapshotPlan, SnapshotTaker
from rag_lab.stream.bus import BusEvent
from rag_lab.stream.manager import stopped_answer
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult
from rag_lab.types.stream import StreamEvent

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    import pandas as pd

    from rag_lab.lab.ask_options import AskOptions, SaveOptions, StepOptions
    from rag_lab.lab.stepper import Stepper
    from rag_lab.observability.ledger import Ledger
    from rag_lab.pipeline.plugin import PluginError

__all__ = [
    "CHAT_MODEL_ID",
    "DEFAULT_CONFIG",
    "PREPARE_CHOICES",
    "RERANK_MODEL_ID",
    "VECTOR_CACHE_ENV",
    "Lab",
    "LabConfigError",
    "Run",
    "StagePause",
    "ensure_owned_session",
    "prepare_texts_for",
    "vector_cache_from_config",
]

#: awaited after every stage with (event, snapshot); the step-through pauses there
StagePause = Callable[[EventType, ChatManage], Awaitable[None]]


@dataclass
class Run:
    """Everything one question produced."""

    question: str
    answer: str
    references: list[SearchResult]
    events: list[StreamEvent]
    timings: list[StageTiming]
    snapshots: dict[str, ChatManage]
    stages: list[str]
    error: str = ""
    is_fallback: bool = False
    session_id: str = ""
    message_id: str = ""
    total_ms: float = 0.0
    params: PipelineParams = field(default_factory=PipelineParams)
    ledger: Ledger | None = None  # time, model calls, tokens, cost
    #: params that could not change this run's outcome (rag_lab.pipeline.knobs), as sentences
    warnings: list[str] = field(default_factory=list)
    #: ``state.diagnostics`` as the run left it (kept with or without snapshots: the gold funnel reads it)
    diagnostics: dict[str, object] = field(default_factory=dict)

    @property
    def degraded(self) -> bool:
        """The model failed and the answer is the fallback (partial text kept): ``error`` says why."""
        return bool(self.error) and self.is_fallback

    def state(self, event: EventType | str) -> ChatManage:
        """The ChatManage snapshot taken right after ``event`` (or ``"final"``)."""
        key = str(event)
        if key not in self.snapshots:
            raise KeyError(f"no snapshot for '{key}'; this run has: {', '.join(self.snapshots)}")
        return self.snapshots[key]

    @property
    def cited_chunk_ids(self) -> list[str]:
        from rag_lab.modelcontext import cited_chunk_ids

        return cited_chunk_ids(self.answer)

    @property
    def retrieved_doc_ids(self) -> list[str]:
        """Document ids of the final contexts, in rank order, each once (for retrieval metrics)."""
        out: list[str] = []
        for r in self.references:
            if r.knowledge_id and r.knowledge_id not in out:
                out.append(r.knowledge_id)
        return out

    def frame(self, which: str = "search", **kw: object) -> pd.DataFrame:
        """Search / fusion / rerank / merge / final results with every score component (pandas);
        ``which="funnel"`` with ``gold_ids=[...]``: where each gold document is at every stage."""
        from rag_lab.lab.frames import frame

        return frame(self, which, **kw)

    def save(self, path: str | Path, **kw: Unpack[SaveOptions]) -> Path:
        """Save as a versioned JSONL capture (replayable without any model)."""
        from rag_lab.lab.capture import save_capture

        return save_capture(self, path, **kw)

    def timings_frame(self) -> pd.DataFrame:
        """One row per stage: event, start, ``duration_ms`` (background work included) and
        ``background_ms``, error (pandas)."""
        from dataclasses import asdict

        import pandas as pd

        return pd.DataFrame([asdict(t) for t in self.timings])


_T = TypeVar("_T")


def _run_sync(coro_factory: Callable[[], Awaitable[_T]]) -> _T:
    from rag_lab.asyncutil import run_sync

    return run_sync(coro_factory)


class Lab(LabRequests, LabKnowledge, LabTurns):
    """The facade: built from a config by :func:`~rag_lab.lab.factory.wire_lab` (the attributes
    :class:`~rag_lab.lab.parts.LabParts` lists), it asks questions and returns a :class:`Run`
    for each."""

    def __init__(
        self, config: Mapping[str, Any] | None = None, source: str = "<dict>", workspace: str | Path | None = None
    ) -> None:
        wire_lab(self, config, source, workspace)

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_config(cls, path: str | Path | Mapping[str, object] | None = None, **overrides: Any) -> Lab:
        """From a YAML file (default ``config/lab.yaml``) or a dict; ``overrides`` replace top keys
        (``workspace=...``, ``params={...}``)."""
        cfg, source = read_config(path)
        workspace = overrides.pop("workspace", None)
        cfg.update(overrides)
        return cls(cfg, source=source, workspace=workspace)

    # -- asking -----------------------------------------------------------------------------
    async def aask(
        self,
        question: str,
        kb: str | list[str] | None = None,
        params: PipelineParams | Mapping[str, object] | None = None,
        session_id: str = "",
        on_event: Callable[[BusEvent], None] | None = None,
        snapshots: bool = True,
        message_id: str = "",
        cancel_event: asyncio.Event | None = None,
        pause: StagePause | None = None,
        user_id: str = "lab",
        tenant_id: int = 0,
        persist: bool = True,
        retrieval_only: bool = False,
    ) -> Run:
        """Run the pipeline for one question. ``retrieval_only``: stop after the search stage (no
        rerank, merge or answer): the run's references are the search stage's output, in its order. ``cancel_event`` (an ``asyncio.Event``) stops it
        after the current stage / stream chunk, like the user's stop button; ``pause`` is awaited
        after every stage with (event, snapshot) — the step-through uses it. ``user_id`` and
        ``tenant_id`` name the caller: without ``kb`` the tenant's visible KBs are searched, a KB
        of another tenant is unknown, and a session of another user raises
        :class:`~rag_lab.session.sqlite_store.SessionNotFound`. ``persist=False`` writes neither
        the user nor the assistant message (nor runs §9.1's after-completion steps): the history
        of ``session_id`` is still read, the turn itself leaves nothing in ``sessions.sqlite``
        (evaluations ask that way unless told to keep sessions)."""
        p = self._params(params)
        kbs = [kb] if isinstance(kb, str) else list(kb or [k.name for k in self.visible_kbs(tenant_id)])
        chat = self.new_chat(question, kbs, p, session_id, user_id=user_id, tenant_id=tenant_id)
        chat.context.message_id = message_id or str(uuid.uuid4())
        chat.context.cancel_event = cancel_event
        events = None
        if retrieval_only:
            from rag_lab.pipeline.orchestrator import build_event_list

            full = build_event_list(chat)
            if EventType.CHUNK_SEARCH_PARALLEL not in full:
                raise ValueError("retrieval_only needs a question with a knowledge base to search")
            events = full[: full.index(EventType.CHUNK_SEARCH_PARALLEL) + 1]
            persist = False  # nothing is answered: no turn to keep
        if persist:
            self._open_turn(chat, user_id, tenant_id)
        return await self._execute(chat, events, {}, snapshots, on_event, pause, remember=persist)

    async def arerun(
        self,
        run: Run,
        from_stage: EventType | str,
        params: PipelineParams | Mapping[str, object] | None = None,
        on_event: Callable[[BusEvent], None] | None = None,
    ) -> Run:
        """Run ``run`` again from ``from_stage`` with changed params, reusing the state every
        earlier stage produced (their snapshots). Unchanged params reproduce the run."""
        stage = str(from_stage)
        if stage not in run.stages:
            raise ValueError(f"stage '{stage}' is not in this run's stages: {', '.join(run.stages)}")
        i = run.stages.index(stage)
        if i == 0:
            raise ValueError(f"'{stage}' is the first stage: use ask() to run the whole pipeline again")
        before = run.stages[i - 1]
        if before not in run.snapshots:
            raise ValueError(f"run has no snapshot after '{before}' (it was asked with snapshots=False)")
        chat = run.snapshots[before].snapshot()
        chat.request.apply_params(self._params(params, run.params))
        chat.context.message_id = str(uuid.uuid4())
        upstream = {k: v for k, v in run.snapshots.items() if k in run.stages[:i]}
        events = [EventType(e) for e in run.stages[i:]]
        return await self._execute(chat, events, upstream, True, on_event, None, remember=False)

    def rerun(
        self, run: Run, from_stage: EventType | str, params: PipelineParams | Mapping[str, object] | None = None
    ) -> Run:
        """Synchronous :meth:`arerun`."""
        return _run_sync(lambda: self.arerun(run, from_stage, params))

    def step(self, question: str, kb: str | list[str] | None = None, **kwargs: Unpack[StepOptions]) -> Stepper:
        """Step through a question stage by stage (``st.next()``, ``await st.anext()``).

        >>> import tempfile
        >>> lab = Lab.from_config(workspace=tempfile.mkdtemp())
        >>> _ = lab.ingest_documents([{"id": "bw-1874", "text": "Mara Quill built the lighthouse in 1874."}], kb="demo")
        >>> st = lab.step("Who built the lighthouse?", kb="demo")
        >>> st.next()
        StageView(load_history: search=0 rerank=0 merge=0)
        >>> view = st.run_to("chunk_rerank")
        >>> [r.knowledge_id for r in view.state.state.rerank_result]
        ['bw-1874']
        >>> st.finish().references[0].knowledge_id
        'bw-1874'
        """
        from rag_lab.lab.stepper import Stepper

        return Stepper(self, question, kb, **kwargs)

    async def _execute(
        self,
        chat: ChatManage,
        events: list[EventType] | None,
        snaps: dict[str, ChatManage],
        snapshots: bool,
        on_event: Callable[[BusEvent], None] | None,
        pause: StagePause | None,
        remember: bool,
    ) -> Run:
        if self._manager is None:  # plugins read the services at call time: build the chain once
            self._manager = build_event_manager(self.services)
            self._snapshot_plan = SnapshotPlan.from_manager(self._manager)
        manager = self._manager
        taker = SnapshotTaker(self._snapshot_plan)  # copy-on-write snapshots from the contracts

        async def on_stage(event: EventType, c: ChatManage, err: PluginError | None) -> None:
            if snapshots or pause is not None:
                snap = taker.take(event, c)
                if snapshots:
                    snaps[str(event)] = snap
                if pause is not None:
                    await pause(event, snap)

        from rag_lab.observability.ledger import Ledger, use_ledger
        from rag_lab.pipeline.knobs import run_warnings

        ledger = Ledger(self.prices)
        # a remembered turn is saved before its ``complete`` is stored: whoever reads the session
        # after ``complete`` finds the assistant message
        hold = remember and self.services.messages is not None
        with use_ledger(ledger):
            outcome: QAOutcome = await run_knowledge_qa(
                chat, self.services, manager, self.stream_manager, on_stage, on_event, events=events, hold_complete=hold
            )
        for t in outcome.timings:
            ledger.stage_ms[t.event] = ledger.stage_ms.get(t.event, 0.0) + t.duration_ms
        if snapshots:
            snaps["final"] = taker.final(chat)
        sid, mid = chat.request.session_id, chat.context.message_id
        stored, _ = self.stream_manager.get_events(sid, mid, 0)
        stopped = stopped_answer(stored)
        if stopped is not None:  # stopped through the log (another replica): the answer is what it holds
            outcome.answer, outcome.cancelled = stopped, True

        def release() -> None:
            """Store the held ``complete`` (once): right after the turn is saved, before §9.1's
            step 2; never after a ``stop`` (the log takes nothing more)."""
            held, outcome.held = outcome.held, []
            for ev in held if stopped is None else []:
                self.stream_manager.append_event(sid, mid, ev)
                stored.append(ev)

        if remember:
            await self._remember_turn(chat, outcome, release)
        release()
        return Run(
            question=chat.request.query,
            answer=outcome.answer,
            references=[r.copy() for r in (chat.state.merge_result or _searched(chat, outcome))],
            events=stored,
            timings=outcome.timings,
            snapshots=snaps,
            stages=[str(e) for e in outcome.events],
            error=str(outcome.error) if outcome.error else outcome.model_error,
            is_fallback=outcome.is_fallback,
            session_id=chat.request.session_id,
            message_id=chat.context.message_id,
            total_ms=outcome.total_ms,
            params=chat.request.params,
            ledger=ledger,
            warnings=[str(w) for w in run_warnings(chat.request.params, chat.state.diagnostics)]
            + [w for w in [self._question_warning(chat)] if w],
            diagnostics=chat.state.diagnostics,
        )

    def ask(self, question: str, kb: str | list[str] | None = None, **kwargs: Unpack[AskOptions]) -> Run:
        """Synchronous :meth:`aask` (works in plain scripts and inside Jupyter).

        >>> import tempfile
        >>> lab = Lab.from_config(workspace=tempfile.mkdtemp())  # the offline models
        >>> _ = lab.ingest_documents([{"id": "bw-1874", "text": "Mara Quill built the lighthouse in 1874."}], kb="demo")
        >>> run = lab.ask("Who built the lighthouse?", kb="demo")
        >>> [r.knowledge_id for r in run.references], "Mara Quill" in run.answer, run.error
        (['bw-1874'], True, '')
        >>> run.stages[:4]
        ['load_history', 'memory_recall', 'query_understand', 'chunk_search_parallel']
        """
        return _run_sync(lambda: self.aask(question, kb, **kwargs))


def _searched(chat: ChatManage, outcome: QAOutcome) -> list[SearchResult]:
    """The search stage's output when the run stopped after it (retrieval only), else nothing."""
    if outcome.events and outcome.events[-1] == EventType.CHUNK_SEARCH_PARALLEL:
        return list(chat.state.search_result)
    return []
