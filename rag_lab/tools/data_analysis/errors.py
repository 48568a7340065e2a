"""Constants and errors of the DATA_ANALYSIS tool (spec §4.10)."""

from __future__ import annotations

DATA_FILE_SUFFIXES = (".csv", ".xlsx", ".xls")

DEFAULT_MAX_ROWS = 50
DEFAULT_TIMEOUT_S = 30.0
#: example values kept per column (schema description and column chunks)
DEFAULT_EXAMPLES = 5
#: longest cell text shown in a Markdown result table
MAX_CELL_CHARS = 200


class DataAnalysisError(RuntimeError):
    """Loading the file or running the query failed; the message names the file / SQL."""


class SQLGuardError(DataAnalysisError, ValueError):
    """The SQL is not a single read-only SELECT / WITH query; the message says what was found."""


class QueryTimeout(DataAnalysisError):
    """The query (or the load) ran longer than the tool's timeout and was interrupted."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
