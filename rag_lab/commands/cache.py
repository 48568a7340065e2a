"""``rag-lab cache stats|clear|warm``: the workspace's caches, the vector cache and the stage cache.

* the **vector cache** (``<workspace>/vectors.sqlite``, :mod:`rag_lab.models.vector_cache`):
  float32 vectors by (embedding model key, text), shared by ingest, the query, the re-scorer and
  the extractive answerer, bounded by ``vector_cache.max_mb`` of the lab config;
* the **stage cache** of sweeps (``<workspace>/stage_cache``, :mod:`rag_lab.eval.cache`): search
  results, rerank scores, query embeddings and captures as JSON entries in ``stages.sqlite``,
  kept by the same storage layer (:mod:`rag_lab.blobstore`), and built BM25 indexes.

``stats`` and ``clear`` build no Lab (no model is loaded): the workspace and the bound come from
``--workspace`` / the config file. ``clear`` removes both unless ``--vectors`` or ``--stages``
narrows it; ``--model KEY`` removes one embedding model's vectors only. ``cache warm [--kb NAME]``
(which does build a Lab) fills the vector cache for KBs ingested before it existed.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import yaml

from rag_lab.cliutil import Command, command, flag, many, opt
from rag_lab.commands import lab_from

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.models.vector_cache import VectorCache

__all__ = ["CACHE_COMMAND", "cache_paths"]


def cache_paths(args: argparse.Namespace) -> tuple[Path, VectorCache | None]:
    """The workspace root and its :class:`~rag_lab.models.vector_cache.VectorCache` (``None`` when
    the config says ``vector_cache: false``) as a Lab built from the same options would have them."""
    from rag_lab.lab.lab import DEFAULT_CONFIG, LabConfigError, vector_cache_from_config

    path = Path(args.config) if getattr(args, "config", None) else DEFAULT_CONFIG
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise LabConfigError(f"{path}: config file not found") from None
    if not isinstance(cfg, dict):
        raise LabConfigError(f"{path}: expected a mapping at the top level")
    root = Path(getattr(args, "workspace", None) or cfg.get("workspace") or ".rag_lab")
    return root, vector_cache_from_config(cfg.get("vector_cache", True), root, str(path))


def _mb(n: float) -> str:
    return f"{n / (1024 * 1024):.1f} MB"


class _StageCacheStats(TypedDict):
    path: str
    entries: int
    bytes: int
    max_bytes: int
    stages: dict[str, int]


def _stage_cache(root: Path) -> _StageCacheStats:
    """The entries per stage of ``<root>/stage_cache`` (nothing is created where there is none)."""
    from rag_lab.eval.cache.store import DEFAULT_MAX_BYTES, FILE_NAME, StageCache

    folder = root / "stage_cache"
    out: _StageCacheStats = {
        "path": str(folder),
        "entries": 0,
        "bytes": 0,
        "max_bytes": DEFAULT_MAX_BYTES,
        "stages": {},
    }
    if (folder / FILE_NAME).is_file():
        cache = StageCache(folder)
        try:
            st = cache.store_stats()
        finally:
            cache.close()
        out["entries"], out["bytes"] = st["rows"], st["bytes"]
        out["stages"] = {k: v["rows"] for k, v in st["spaces"].items()}
    return out


@command(
    "stats",
    "vectors per embedding model, bytes against the bound; stage-cache entries",
    flag("--json", "print the numbers as JSON"),
)
def cmd_cache_stats(args: argparse.Namespace) -> int:
    root, vectors = cache_paths(args)
    stages = _stage_cache(root)
    vstats = vectors.stats() if vectors is not None and vectors.path.exists() else None
    if args.json:
        print(json.dumps({"vectors": vstats, "stages": stages}, indent=2))
        return 0
    if vectors is None:
        print("vector cache: off (vector_cache: false in the config)")
    elif vstats is None:
        print(f"vector cache: {vectors.path}: empty (bound {_mb(vectors.max_bytes)})")
    else:
        print(
            f"vector cache: {vstats['path']}: {vstats['rows']:,} vectors, {_mb(vstats['bytes'])} of "
            f"{_mb(vstats['max_bytes'])} ({_mb(vstats['file_bytes'])} on disk)"
        )
        for key, m in vstats["models"].items():
            print(f"  {key}: {m['rows']:,} vectors, {_mb(m['bytes'])}")
    if stages["entries"]:
        per = ", ".join(f"{k} {v:,}" for k, v in sorted(stages["stages"].items()))
        print(
            f"stage cache: {stages['path']}: {stages['entries']:,} entries ({per}), "
            f"{_mb(stages['bytes'])} of {_mb(stages['max_bytes'])}"
        )
    else:
        print(f"stage cache: {stages['path']}: empty")
    return 0


@command(
    "clear",
    "remove cached vectors and stage-cache entries (both by default)",
    flag("--vectors", "the vector cache only"),
    flag("--stages", "the stage cache only"),
    opt("--model", "only the vectors of this embedding model key", metavar="KEY"),
)
def cmd_cache_clear(args: argparse.Namespace) -> int:
    root, vectors = cache_paths(args)
    both = not (args.vectors or args.stages)
    if args.model and args.stages:
        raise ValueError("--model applies to the vector cache only; leave out --stages")
    if args.vectors or both or args.model:
        if vectors is not None and vectors.path.exists():
            n = vectors.clear(args.model)
            which = f" of {args.model!r}" if args.model else ""
            print(f"vector cache: removed {n:,} vectors{which} from {vectors.path}")
        else:
            print("vector cache: nothing to remove")
    if (args.stages or both) and not args.model:
        stages = _stage_cache(root)
        if Path(stages["path"]).is_dir():
            shutil.rmtree(stages["path"])
            print(f"stage cache: removed {stages['path']} ({stages['entries']:,} entries)")
        else:
            print("stage cache: nothing to remove")
    return 0


@command(
    "warm",
    "fill the vector cache for knowledge bases ingested before it existed",
    many("--kb", "knowledge base name or id (repeatable; default all)"),
)
def cmd_cache_warm(args: argparse.Namespace) -> int:
    """Fill the vector cache for KBs ingested earlier (their index's vectors, then the texts the
    re-scorer and the answerer will embed)."""
    from rag_lab.knowledge.scored_texts import warm_kb

    lab = lab_from(args)
    if lab.vector_cache is None:
        raise ValueError("the config says vector_cache: false; there is no cache to warm")
    kbs = [lab.workspace.get_kb(k) for k in args.kb] if args.kb else lab.workspace.list_kbs()
    for kb in kbs:
        if kb.embedding_model_key != lab.embedder.model_key:
            print(
                f"{kb.name}: skipped (embedding model {kb.embedding_model_key!r}, this lab's is {lab.embedder.model_key!r})"
            )
            continue
        copied, computed = warm_kb(lab.workspace, kb, lab.embedder)
        print(f"{kb.name}: {copied:,} vectors copied from its index, {computed:,} texts embedded")
    return 0


CACHE_COMMAND = Command(
    "cache",
    "the workspace's vector cache and stage cache: stats, clear",
    subcommands=(cmd_cache_stats, cmd_cache_clear, cmd_cache_warm),
)
