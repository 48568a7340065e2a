"""Tools the pipeline runs on behalf of the model (DATA_ANALYSIS's DuckDB tool, spec §4.10).

Names resolve lazily so that importing this package does not import DuckDB or pandas.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    name: "rag_lab.tools.data_analysis"
    for name in (
        "DataAnalysisTool",
        "DataAnalysisError",
        "SQLGuardError",
        "QueryTimeout",
        "TableSchema",
        "ColumnProfile",
        "QueryResult",
        "AnalysisInput",
        "check_read_only_sql",
        "parse_analysis_input",
        "table_name_for",
        "render_markdown_table",
        "DATA_FILE_SUFFIXES",
    )
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rag_lab.tools' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
