"""Tools the pipeline runs on behalf of the model (DATA_ANALYSIS's DuckDB tool, spec §4.10).

The names are those of :mod:`rag_lab.tools.data_analysis`, listed there once; importing this
package does not import DuckDB or pandas (the tool imports them when it loads a file).
"""

from __future__ import annotations

from rag_lab.tools.data_analysis import *  # noqa: F403
from rag_lab.tools.data_analysis import __all__ as __all__
