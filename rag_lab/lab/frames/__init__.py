"""Run state as tables: search, fusion, rerank, merge and final results with every score component.

:func:`frame` returns a pandas DataFrame; the ``*_rows`` functions return the same rows as plain
dicts (the plots and widgets use them, and they need no pandas). Each accepts a
:class:`~rag_lab.lab.Run`, a :class:`~rag_lab.lab.capture.Capture` or a single ChatManage snapshot.
Given a run, each view reads the snapshot taken right after its stage (search results are scored
in place by the rerank stage and rewritten by the merge, so a later snapshot would mislead);
given a snapshot, it reads that snapshot as it is.

Besides the tables this module holds the small pure helpers the views share: the rerank
threshold ladder replayed at any threshold (:func:`threshold_outcome`), the MMR inputs and a
re-selection at any λ (:func:`mmr_inputs`, :func:`mmr_selection`), and the hybrid-search fusion
records (:func:`fusion_record`, :func:`fusion_trace`).

The package is split by view: :mod:`.search` (search and fusion), :mod:`.rerank` (rerank,
threshold ladder, MMR), :mod:`.merge` (merge and final), over :mod:`.common` (which snapshot a
view reads, typed diagnostics).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rag_lab.lab.frames.common import FRAMES, Viewed, short_id
from rag_lab.lab.frames.funnel import funnel_frame, funnel_of, funnel_rows
from rag_lab.lab.frames.merge import final_rows, merge_rows
from rag_lab.lab.frames.rerank import (
    ThresholdOutcome,
    mmr_inputs,
    mmr_selection,
    rerank_rows,
    rerank_threshold_outcome,
    threshold_outcome,
)
from rag_lab.lab.frames.search import fusion_data, fusion_record, fusion_rows, fusion_trace, search_rows

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "FRAMES",
    "ThresholdOutcome",
    "final_rows",
    "frame",
    "funnel_frame",
    "funnel_of",
    "funnel_rows",
    "fusion_data",
    "fusion_record",
    "fusion_rows",
    "fusion_trace",
    "merge_rows",
    "mmr_inputs",
    "mmr_selection",
    "rerank_rows",
    "search_rows",
    "short_id",
    "threshold_outcome",
    "rerank_threshold_outcome",
]

_ROWS: dict[str, Callable[..., Sequence[Mapping[str, object]]]] = {
    "search": search_rows,
    "fusion": fusion_rows,
    "rerank": rerank_rows,
    "merge": merge_rows,
    "final": final_rows,
    "funnel": funnel_rows,
}


def frame(obj: Viewed, which: str = "search", **kwargs: object) -> pd.DataFrame:
    """A DataFrame of one view: ``search``, ``fusion``, ``rerank``, ``merge``, ``final`` or
    ``funnel`` (see the ``*_rows`` functions for the columns). ``fusion=`` passes a fusion trace to
    the search and fusion views; ``gold_ids=`` names the gold documents of the funnel view."""
    import pandas as pd

    fn = _ROWS.get(which)
    if fn is None:
        raise ValueError(f"unknown frame {which!r}; choose one of {', '.join(_ROWS)}")
    rows = fn(obj, **kwargs)
    return pd.DataFrame(rows)
