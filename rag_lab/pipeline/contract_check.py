"""Record what stages really read and write, to check their declared contracts.

:func:`record_access` patches, for the duration of a ``with`` block, the attribute access of
``PipelineRequest`` / ``PipelineState`` / ``PipelineContext`` (reads and assignments),
``PipelineParams`` and ``KnowledgeBase`` (reads), and wraps ``on_event`` of the given plugin
classes. Every access is attributed to the innermost stage running in the current task (a
context variable, so the concurrent searches of CHUNK_SEARCH_PARALLEL and the answer stream's
background task are attributed correctly). In-place changes (a list sorted, a result's score
changed, a diagnostics key added) are found by comparing deep copies of the ChatManage fields at
each stage boundary: on entry, when it calls ``next()``, when ``next()`` returns and on exit.

The patching is global, so use it in tests and tools only, never while serving requests.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import pickle
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.pipeline.contracts import StageContract, contract_of
from rag_lab.types.chat_manage import ChatManage, PipelineContext, PipelineRequest, PipelineState
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.plugin import NextFn, PluginError
    from rag_lab.types.events import EventType

__all__ = ["StageAccess", "record_access", "undeclared"]

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("rag_lab_contract_stage", default=None)

#: read but not part of a contract: params are declared field by field; diagnostics are write-only
_IGNORED_READS = frozenset({"request.params", "state.diagnostics"})
_PARAM_FIELDS = frozenset(PipelineParams.model_fields)
_KB_FIELDS = frozenset(f.name for f in dataclasses.fields(KnowledgeBase))


@dataclass
class StageAccess:
    """What one stage (plugin class) was seen doing."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    params: set[str] = field(default_factory=set)
    kb: set[str] = field(default_factory=set)
    calls: int = 0


def _fingerprint(chat: ChatManage) -> dict[str, object]:
    out: dict[str, object] = {}
    for section, obj in (("request", chat.request), ("state", chat.state)):
        for f in dataclasses.fields(obj):
            if f.name == "params":
                continue
            value = object.__getattribute__(obj, f.name)
            if f.name == "diagnostics":
                for key, v in value.items():
                    out[f"state.diagnostics.{key}"] = _copy(v)
                continue
            out[f"{section}.{f.name}"] = _copy(value)
    ctx = chat.context
    for f in dataclasses.fields(ctx):
        value = object.__getattribute__(ctx, f.name)
        out[f"context.{f.name}"] = tuple(map(id, value)) if isinstance(value, list) else ("id", id(value))
    return out


def _copy(value: object) -> object:
    """The value's pickle (compares NaN equal to itself, unlike ``==``); identity when it cannot
    be pickled (tasks, locks, model responses holding sockets)."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return ("id", id(value))


def _changed(before: dict[str, object], after: dict[str, object]) -> set[str]:
    out = set()
    for key in before.keys() | after.keys():
        a, b = before.get(key, _MISSING), after.get(key, _MISSING)
        if a != b:
            out.add(key)
            if _DEBUG and key in _DEBUG:
                import pickle as _p

                print(
                    "CHANGED",
                    _current.get(),
                    key,
                    str(_p.loads(a) if isinstance(a, bytes) else a)[:200],
                    "->",
                    str(_p.loads(b) if isinstance(b, bytes) else b)[:200],
                )
    return out


_MISSING = object()
_DEBUG = set(__import__("os").environ.get("CONTRACT_DEBUG", "").split(",")) - {""}


@contextlib.contextmanager
def record_access(plugin_classes: Iterable[type]) -> Iterator[dict[str, StageAccess]]:
    """``with record_access(classes) as seen:`` — ``seen[class name]`` fills while stages run."""
    seen: dict[str, StageAccess] = defaultdict(StageAccess)
    restore: list[tuple[type, str, object]] = []

    def patch(cls: type, name: str, value: object) -> None:
        restore.append((cls, name, cls.__dict__.get(name, _MISSING)))
        setattr(cls, name, value)

    def section_hooks(cls: type, section: str) -> None:
        names = frozenset(f.name for f in dataclasses.fields(cls))
        base_get: Any = cls.__getattribute__
        base_set: Any = cls.__setattr__

        def getattribute(self: object, name: str) -> object:
            stage = _current.get()
            if stage is not None and name in names:
                path = f"{section}.{name}"
                if path not in _IGNORED_READS:
                    seen[stage].reads.add(path)
            return base_get(self, name)

        def setattr_(self: object, name: str, value: object) -> None:
            stage = _current.get()
            if stage is not None and name in names:
                seen[stage].writes.add(f"{section}.{name}")
            base_set(self, name, value)

        patch(cls, "__getattribute__", getattribute)
        patch(cls, "__setattr__", setattr_)

    def read_hook(cls: type, names: frozenset[str], bucket: str) -> None:
        base_get: Any = cls.__getattribute__

        def getattribute(self: object, name: str) -> object:
            stage = _current.get()
            if stage is not None and name in names:
                getattr(seen[stage], bucket).add(name)
            return base_get(self, name)

        patch(cls, "__getattribute__", getattribute)

    def wrap(cls: type) -> None:
        original: Callable[..., Awaitable[PluginError | None]] | None = cls.__dict__.get("on_event")
        if original is None:
            return
        stage_name = cls.__name__

        async def on_event(self: object, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
            token = _current.set(stage_name)
            seen[stage_name].calls += 1
            mark = _fingerprint(chat)

            async def next_() -> PluginError | None:
                nonlocal mark
                seen[stage_name].writes.update(_changed(mark, _fingerprint(chat)))
                inner = _current.set(None)
                try:
                    return await next()
                finally:
                    _current.reset(inner)
                    mark = _fingerprint(chat)

            try:
                return await original(self, event, chat, next_)
            finally:
                seen[stage_name].writes.update(_changed(mark, _fingerprint(chat)))
                _current.reset(token)

        patch(cls, "on_event", on_event)

    def quiet(method: Callable[..., object]) -> Callable[..., object]:
        def run(self: object, *args: object, **kwargs: object) -> object:
            token = _current.set(None)  # a whole copy is not a read of every field
            try:
                return method(self, *args, **kwargs)
            finally:
                _current.reset(token)

        return run

    try:
        for name in ("clone", "snapshot", "to_dict"):
            patch(ChatManage, name, quiet(ChatManage.__dict__[name]))
        sections: tuple[tuple[type, str], ...] = (
            (PipelineRequest, "request"),
            (PipelineState, "state"),
            (PipelineContext, "context"),
        )
        for section_cls, section in sections:
            section_hooks(section_cls, section)
        read_hook(PipelineParams, _PARAM_FIELDS, "params")
        read_hook(KnowledgeBase, _KB_FIELDS, "kb")
        for plugin_cls in dict.fromkeys(plugin_classes):
            wrap(plugin_cls)
        yield seen
    finally:
        for cls, name, old in reversed(restore):
            if old is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, old)


def undeclared(plugin: object, access: StageAccess) -> dict[str, list[str]]:
    """What ``access`` shows the plugin doing beyond its contract (empty lists: all declared)."""
    c: StageContract = contract_of(plugin)
    writes = {w for w in access.writes if w not in c.writes}
    return {
        "reads": sorted(access.reads - set(c.reads)),
        "writes": sorted(writes),
        "params": sorted(access.params - set(c.params)),
        "kb": sorted(access.kb - set(c.kb)),
    }
