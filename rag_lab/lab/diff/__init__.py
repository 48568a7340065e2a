"""Diff two ChatManage snapshots: two stages of one run, or one stage of two runs.

``diff(a, b)`` compares each result list (search / rerank / merge) chunk by chunk and every other
field of the request and state:

* a chunk is ``added`` (only in b), ``dropped`` (only in a), ``moved`` (in both, but its place
  among the chunks the two lists share changed) or ``same``; absolute ranks, score deltas and
  whether its text changed are reported for every chunk. Measuring moves among shared chunks
  means one chunk inserted at the top does not mark every chunk below it as moved.
* a field (``state.rewrite_query``, ``state.rendered_contexts``, ``request.params.mmr_lambda``,
  ``state.diagnostics.rerank``, …) is reported when its JSON value differs.

Chunks are matched by id; a list holding one id twice matches the n-th occurrence in a with the
n-th in b. ``SnapshotDiff.frame()`` is a pandas view; ``to_html()`` / ``_repr_html_()`` render a
table for notebooks.

The package is split into :mod:`.model` (the change records and their views) and
:mod:`.compute` (matching and comparing).
"""

from __future__ import annotations

from rag_lab.lab.diff.compute import diff, diff_lists
from rag_lab.lab.diff.model import RESULT_LISTS, SCORE_EPS, ChunkChange, FieldChange, SnapshotDiff

__all__ = ["RESULT_LISTS", "SCORE_EPS", "ChunkChange", "FieldChange", "SnapshotDiff", "diff", "diff_lists"]
