"""Which retrieval engine serves each knowledge base, from the lab config.

::

    engine: {type: local}                    # default for every KB (the in-process FAISS + bm25s)
    knowledge_bases:                         # per-KB choice, by KB name
      team_docs:
        engine: {type: milvus, uri: "http://milvus.internal:19530", token_env: MILVUS_TOKEN}
      scratch:
        engine: {type: milvus, uri: .rag_lab/milvus.db}   # Milvus Lite, same client code

``type: local`` needs nothing else; ``type: milvus`` takes the keys of
:class:`~rag_lab.retrieval.milvus_engine.MilvusConfig`. KBs whose engines share a store
(same uri, database and collection prefix) share one client and form one HybridSearch store
group (spec §5.8); HybridSearch fuses their result lists itself, and normalises vector scores
per engine type when several engine types answer one search (§5.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rag_lab.retrieval.base import RetrieveEngine

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.milvus_engine import MilvusEngine

ENGINE_TYPES = ("local", "milvus")
_KB_KEYS = ("engine",)


class EngineConfigError(ValueError):
    """A bad ``engine`` / ``knowledge_bases`` entry; the message names where and what."""


def check_engine_config(cfg: object, source: str) -> dict[str, object]:
    """``cfg`` as a dict with a known ``type`` (``None`` → local); Milvus settings validated."""
    if cfg is None:
        return {"type": "local"}
    if isinstance(cfg, str):
        cfg = {"type": cfg}
    if not isinstance(cfg, Mapping):
        raise EngineConfigError(f"{source}: expected a mapping like {{type: milvus, uri: ...}}, got {cfg!r}")
    out = dict(cfg)
    kind = out.get("type", "local")
    if kind not in ENGINE_TYPES:
        raise EngineConfigError(f"{source}.type={kind!r} is not one of {', '.join(ENGINE_TYPES)}")
    out["type"] = kind
    if kind == "local":
        extra = sorted(set(out) - {"type"})
        if extra:
            raise EngineConfigError(f"{source}: the local engine takes no settings, got {', '.join(extra)}")
    else:
        from rag_lab.retrieval.milvus_engine import MilvusConfig, MilvusEngineError

        try:
            MilvusConfig.from_mapping(out, source=source)
        except MilvusEngineError as exc:
            raise EngineConfigError(str(exc)) from None
    return out


class EngineRouter:
    """``engine_for(kb)`` for :class:`~rag_lab.retrieval.hybrid_search.HybridSearcher` and
    ``mirror_for(kb)`` for the workspace (the external engine ingestion writes to)."""

    def __init__(
        self,
        workspace: Workspace,
        default: object = None,
        knowledge_bases: Mapping[str, object] | None = None,
        source: str = "lab config",
    ) -> None:
        self.workspace = workspace
        self.default = check_engine_config(default, f"{source}: engine")
        self.per_kb: dict[str, dict[str, object]] = {}
        if knowledge_bases is not None and not isinstance(knowledge_bases, Mapping):
            raise EngineConfigError(f"{source}: knowledge_bases must map KB names to settings")
        for name, settings in (knowledge_bases or {}).items():
            where = f"{source}: knowledge_bases.{name}"
            if not isinstance(settings, Mapping):
                raise EngineConfigError(f"{where}: expected a mapping like {{engine: {{type: milvus, ...}}}}")
            unknown = sorted(set(settings) - set(_KB_KEYS))
            if unknown:
                raise EngineConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(_KB_KEYS)}")
            if "engine" in settings:
                self.per_kb[str(name)] = check_engine_config(settings["engine"], f"{where}.engine")
        self._milvus: dict[str, MilvusEngine] = {}

    def config_for(self, kb: KnowledgeBase | str) -> dict[str, object]:
        name = kb if isinstance(kb, str) else kb.name
        return self.per_kb.get(name, self.default)

    def milvus(self, cfg: Mapping[str, object]) -> MilvusEngine:
        """The shared MilvusEngine of a milvus engine config (one client per store)."""
        from rag_lab.retrieval.milvus_engine import MilvusConfig, MilvusEngine

        mc = MilvusConfig.from_mapping(cfg)
        eng = self._milvus.get(mc.key)
        if eng is None:
            eng = self._milvus[mc.key] = MilvusEngine(self.workspace, mc)
        return eng

    def engine_for(self, kb: KnowledgeBase) -> tuple[str, RetrieveEngine]:
        cfg = self.config_for(kb)
        if cfg["type"] == "milvus":
            eng = self.milvus(cfg)
            return eng.config.key, eng
        return "", self.workspace.engine()

    def mirror_for(self, kb: KnowledgeBase) -> MilvusEngine | None:
        cfg = self.config_for(kb)
        return self.milvus(cfg) if cfg["type"] == "milvus" else None

    def close(self) -> None:
        for eng in self._milvus.values():
            eng.close()
        self._milvus.clear()


__all__ = ["ENGINE_TYPES", "EngineConfigError", "EngineRouter", "check_engine_config"]
