"""Declared stage contracts: what each stage reads and writes on ChatManage, and which params and
knowledge-base settings it reads.

Every stage plugin carries a class attribute ``contract = StageContract(...)``. Names are dotted
paths on :class:`~rag_lab.types.chat_manage.ChatManage`:

* ``reads`` / ``writes``: ``request.<field>``, ``state.<field>``, ``context.<field>``; a stage's
  lab diagnostics are written as ``state.diagnostics.<key>`` (diagnostics are outputs only: no
  stage reads another's). ``request.params`` is implied by a non-empty ``params``.
* ``params``: :class:`~rag_lab.types.params.PipelineParams` fields, read directly or through the
  helpers and services the stage calls (the searcher reads its over-recall and fusion params).
* ``kb``: :class:`~rag_lab.knowledge.models.KnowledgeBase` settings the stage reads.

The declarations cannot drift: ``tests/pipeline/test_pipeline_contracts.py`` runs every stage on
the bundled demo questions with :func:`rag_lab.pipeline.contract_check.record_access` and fails on
an undeclared read or write. The stage cache keys a cached stage by its declared params, and
``rag-lab stages`` / ``docs/stages.md`` print the table (:func:`stage_table`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rag_lab.knowledge.models import KnowledgeBase
from rag_lab.types.chat_manage import PipelineContext, PipelineRequest, PipelineState
from rag_lab.types.params import PipelineParams

__all__ = ["ContractError", "StageContract", "check_contract", "contract_of", "stage_table", "stage_table_markdown"]

_SECTIONS: dict[str, type] = {"request": PipelineRequest, "state": PipelineState, "context": PipelineContext}


class ContractError(ValueError):
    """A contract names a field that does not exist; the message names the stage, list and value."""


def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


@dataclass(frozen=True, slots=True)
class StageContract:
    """What one stage reads and writes (see the module docstring for the name format)."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    kb: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("reads", "writes", "params", "kb"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ContractError(f"StageContract.{name}: expected a tuple of names, got the string {value!r}")
            object.__setattr__(self, name, tuple(sorted(dict.fromkeys(value))))

    def to_dict(self) -> dict[str, list[str]]:
        return {name: list(getattr(self, name)) for name in ("reads", "writes", "params", "kb")}


def check_contract(stage: str, contract: StageContract) -> None:
    """Raise :class:`ContractError` naming ``stage``, the list and the value of any unknown name."""
    for list_name in ("reads", "writes"):
        for path in getattr(contract, list_name):
            section, _, rest = path.partition(".")
            cls = _SECTIONS.get(section)
            field_name = rest.split(".", 1)[0]
            if cls is None or not rest:
                raise ContractError(
                    f"{stage}: contract {list_name} {path!r}: expected 'request.<field>', 'state.<field>' or "
                    "'context.<field>'"
                )
            if field_name not in _field_names(cls):
                raise ContractError(
                    f"{stage}: contract {list_name} {path!r}: {cls.__name__} has no field {field_name!r}"
                )
            if "." in rest and field_name != "diagnostics":
                raise ContractError(f"{stage}: contract {list_name} {path!r}: only state.diagnostics takes a key")
    unknown = [p for p in contract.params if p not in PipelineParams.model_fields]
    if unknown:
        raise ContractError(f"{stage}: contract params {unknown}: not PipelineParams fields")
    unknown = [k for k in contract.kb if k not in _field_names(KnowledgeBase)]
    if unknown:
        raise ContractError(f"{stage}: contract kb {unknown}: not KnowledgeBase settings")


def contract_of(plugin: object) -> StageContract:
    """The contract declared by a plugin (instance or class); an error names a plugin without one."""
    contract = getattr(plugin, "contract", None)
    if not isinstance(contract, StageContract):
        name = plugin.__name__ if isinstance(plugin, type) else type(plugin).__name__
        raise ContractError(f"{name}: no StageContract declared (class attribute 'contract')")
    return contract


def stage_table(plugins: Iterable[object]) -> list[dict[str, Sequence[str]]]:
    """One row per plugin, in registration order: stage (class), events, reads, writes, params, kb."""
    rows = []
    for p in plugins:
        c = contract_of(p)
        rows.append(
            {
                "stage": type(p).__name__ if not isinstance(p, type) else p.__name__,
                "events": [str(e) for e in getattr(p, "events", ())],
                **c.to_dict(),
            }
        )
    return rows


def stage_table_markdown(plugins: Iterable[object]) -> str:
    """The table as Markdown (``docs/stages.md`` holds this text between its markers)."""
    lines = ["| stage | events | reads | writes | params | KB settings |", "|---|---|---|---|---|---|"]
    for row in stage_table(plugins):

        def cell(names: Sequence[str]) -> str:
            return "<br>".join(f"`{n}`" for n in names) or "—"

        lines.append(
            f"| {row['stage']} | {cell(row['events'])} | {cell(row['reads'])} | {cell(row['writes'])} | "
            f"{cell(row['params'])} | {cell(row['kb'])} |"
        )
    return "\n".join(lines) + "\n"
