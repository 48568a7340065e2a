"""DataAnalysisTool: one CSV / Excel file in an in-memory DuckDB, queried with one read-only SELECT.

Used by DATA_ANALYSIS (spec §4.10, seed "DATA_ANALYSIS — Analyse tabulaire DuckDB") and by table
ingestion (the same DuckDB type inference feeds the ``table_summary`` / ``table_column`` chunks, so
what retrieval shows the model is what the SQL will see).

Safety, in three layers (each enough for the common cases, together for the tricky ones):

1. :func:`check_read_only_sql`, a lexical guard that understands string literals, quoted
   identifiers and comments: one statement starting with ``SELECT`` or ``WITH``, an optional
   trailing ``;`` only, no data-changing or session keyword (``INSERT``, ``DROP``, ``COPY``,
   ``ATTACH``, ``PRAGMA``, ``SET``, ``INSTALL``, ...), no file-reading table function
   (``read_csv``, ``read_parquet``, ``glob``, ``*_scan``, ``query``, ...), no file path in ``FROM``,
   no ``$`` quoting; then DuckDB's own parser must see exactly one ``SELECT`` statement.
2. The connection is sandboxed once the file is loaded: ``enable_external_access = false`` and
   ``lock_configuration = true`` (no file, network or extension access, and no way back).
3. Each query runs under a timeout (``connection.interrupt()`` from a timer) and only the first
   ``max_rows`` rows are fetched.

The package is split by responsibility: :mod:`.guard` (the SQL guard), :mod:`.loading` (the tool:
loading, profiling, running queries), :mod:`.formatting` (the model's input, values, Markdown
tables, schema and result types), :mod:`.errors` (constants and errors). Importing it does not
import DuckDB or pandas.
"""

from __future__ import annotations

from rag_lab.tools.data_analysis.errors import (
    DATA_FILE_SUFFIXES,
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    MAX_CELL_CHARS,
    DataAnalysisError,
    QueryTimeout,
    SQLGuardError,
)
from rag_lab.tools.data_analysis.formatting import (
    AnalysisInput,
    ColumnProfile,
    QueryResult,
    TableSchema,
    format_value,
    parse_analysis_input,
    quote_ident,
    render_markdown_table,
    table_name_for,
)
from rag_lab.tools.data_analysis.guard import FORBIDDEN_KEYWORDS, check_read_only_sql
from rag_lab.tools.data_analysis.loading import DataAnalysisTool

__all__ = [
    "DEFAULT_EXAMPLES",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_TIMEOUT_S",
    "MAX_CELL_CHARS",
    "DATA_FILE_SUFFIXES",
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
    "render_markdown_table",
    "format_value",
    "quote_ident",
    "table_name_for",
    "FORBIDDEN_KEYWORDS",
]
