"""The command-line modules of ``rag-lab`` (:mod:`rag_lab.cli` registers them): commands declared
as data (:func:`rag_lab.cliutil.command`) over the library, at the top of the layers with ``cli``
so that the evaluation package below them never builds a :class:`~rag_lab.lab.lab.Lab` itself.

- :mod:`.evaluate`: ``eval``, ``report``, ``convert`` and the list of evaluation commands;
  :mod:`.sweep`: ``sweep``; :mod:`.gate`: ``gate``; :mod:`.calibrate`: ``calibrate``;
  :mod:`.eval_setup`: what they set up alike
- :mod:`.cache`: ``cache`` (the stage and vector caches)
- :mod:`.runs`: ``runs`` (the run history)
- :mod:`.testset`: ``testset`` (synthetic question sets)
- :mod:`.judge`: ``judge serve`` and ``judge calibrate``
- :mod:`.convert`: ``scripts/convert_datasets.py`` (the bundled-dataset converters by name)
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.cliutil import flag, group, many, opt

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab


def lab_from(args: Namespace, workspace: str | Path | None = None) -> Lab:
    """The :class:`~rag_lab.lab.lab.Lab` of the global ``--config`` and ``--workspace`` (or ``workspace``)."""
    from rag_lab.lab.lab import Lab

    ws = workspace if workspace is not None else getattr(args, "workspace", None)
    return Lab.from_config(getattr(args, "config", None), **({"workspace": ws} if ws else {}))


# the options several commands share, declared once

#: the dataset spec's syntax (the metavar of every --dataset)
SPEC = "NAME[:N[:MAX_DOCS[:SEED]]]"
LIMIT = opt("--limit", "first N questions of each dataset", type=int)
MAX_DOCS = opt("--max-docs", "gold documents plus distractors up to this many", type=int)
PARAM = many("--param", "PipelineParams override (repeatable)", metavar="FIELD=VALUE")
DATASET = (
    many("--dataset", "a name under datasets/ or a folder in the dataset format (repeatable)", metavar=SPEC),
    LIMIT,
    MAX_DOCS,
    PARAM,
    opt(
        "--budget", "refuse to start when the projected model cost is over this many dollars", type=float, metavar="USD"
    ),
)
#: the LLM judge, when not the lab config's ``models.judge``
JUDGE = (opt("--judge-model"), opt("--judge-base-url"), opt("--judge-api-key-env"))
RAGAS = group(
    "ragas",
    flag("--ragas", "add the offline ragas metrics"),
    many("--ragas-metric", "a ragas metric (repeatable)", metavar="NAME"),
    flag(
        "--ragas-llm",
        "add faithfulness, answer_relevancy, llm_context_precision (judge: models.judge or --judge-*)",
    ),
    *JUDGE,
)
TRACKING = group(
    "MLflow (extra 'tracking')",
    flag("--mlflow", "log this run to MLflow (default store sqlite:///<workspace>/mlflow.db)"),
    opt(
        "--mlflow-uri",
        "tracking URI or folder (implies --mlflow; default $RAG_LAB_MLFLOW_URI, $MLFLOW_TRACKING_URI, "
        "sqlite:///<workspace>/mlflow.db)",
        metavar="URI",
    ),
    opt("--mlflow-experiment", "experiment name (default rag_lab)", metavar="NAME"),
)
OUT = opt("--out", default="reports")
CACHE_DIR = opt("--cache-dir", "stage cache folder (default <workspace>/stage_cache)")
