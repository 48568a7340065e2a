"""The model's input (``{knowledge_id, sql}``), values and Markdown tables, and the table schema /
query result types."""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rag_lab.tools.data_analysis.errors import MAX_CELL_CHARS, DataAnalysisError
from rag_lab.tools.data_analysis.guard import _RESERVED


# ---- the model's input ----------------------------------------------------------------------
@dataclass(slots=True)
class AnalysisInput:
    """What the model asked for: ``{"knowledge_id", "sql"}`` (``sql`` empty = no analysis)."""

    knowledge_id: str = ""
    sql: str = ""


_SQL_KEYS = ("sql", "query", "sql_query", "statement")
_KID_KEYS = ("knowledge_id", "knowledgeId", "knowledge", "file_id", "id")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.S)


def _from_mapping(obj: Mapping[str, object]) -> AnalysisInput:
    sql: object = ""
    for k in _SQL_KEYS:
        if k in obj and obj[k] is not None:
            sql = obj[k]
            break
    if not isinstance(sql, str):
        raise DataAnalysisError(f"model reply: field 'sql' = {sql!r} must be a string")
    kid: object = ""
    for k in _KID_KEYS:
        if obj.get(k) is not None:
            kid = obj[k]
            break
    return AnalysisInput(knowledge_id=str(kid).strip(), sql=sql.strip())


def parse_analysis_input(raw: str | Mapping[str, object]) -> AnalysisInput:
    """Read the model's reply tolerantly: a JSON object (bare, fenced, or inside prose, with a few
    key aliases), else a fenced ``sql`` block or a reply that is itself a SELECT / WITH query.
    Anything else raises :class:`DataAnalysisError` quoting the start of the reply."""
    if isinstance(raw, Mapping):
        return _from_mapping(raw)
    if not isinstance(raw, str):
        raise DataAnalysisError(f"model reply must be text or a mapping, got {type(raw).__name__}")
    text = raw.strip()
    candidates = [text] + [m.group(2).strip() for m in _FENCE.finditer(text)]
    a, b = text.find("{"), text.rfind("}")
    if a != -1 and b > a:
        candidates.append(text[a : b + 1])
    for cand in candidates:
        try:
            obj = json.loads(cand)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return _from_mapping(obj)
    for m in _FENCE.finditer(text):
        if m.group(1).lower() in ("sql", "duckdb", ""):
            return AnalysisInput(sql=m.group(2).strip())
    if re.match(r"(?is)\s*(select|with)\b", text):
        return AnalysisInput(sql=text)
    raise DataAnalysisError(f"model reply is not a JSON object with 'sql': {text[:120]!r}")


# ---- values and Markdown --------------------------------------------------------------------
def format_value(v: object) -> str:
    """A cell as text: NULL, true/false, integral floats without '.0', 10 significant digits."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v.is_integer() and abs(v) < 1e15:
            return str(int(v))
        return format(v, ".10g")
    if isinstance(v, decimal.Decimal):
        return format(v.normalize(), "f") if v == v.to_integral_value() else str(v)
    if isinstance(v, _dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (_dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return f"<{len(v)} bytes>"
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v, ensure_ascii=False, default=str)
    return str(v)


def _cell(v: object) -> str:
    s = " ".join(format_value(v).split())
    if len(s) > MAX_CELL_CHARS:
        s = s[: MAX_CELL_CHARS - 1] + "…"
    return s.replace("\\", "\\\\").replace("|", "\\|")


def render_markdown_table(columns: list[str], rows: list[tuple[object, ...]]) -> str:
    """A GitHub-style Markdown table (``|`` and backslashes escaped, newlines folded)."""
    head = "| " + " | ".join(_cell(c) for c in columns) + " |"
    sep = "| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join([head, sep, *body])


def quote_ident(name: str) -> str:
    """``name`` as it must be written in SQL: bare when a plain lower-case identifier that is no
    keyword, otherwise double-quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name.upper() not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def table_name_for(file_name: str) -> str:
    """A bare SQL table name from a file name: ``"Sales 2024.csv"`` → ``sales_2024``."""
    stem = Path(file_name).stem.lower()
    name = re.sub(r"[^a-z0-9_]+", "_", stem).strip("_")
    if not name:
        return "data"
    if name[0].isdigit() or name.upper() in _RESERVED:
        name = "t_" + name
    return name


# ---- schema ---------------------------------------------------------------------------------
_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "REAL",
)
_TEMPORAL = ("DATE", "TIME", "TIMESTAMP")


def _is_numeric(t: str) -> bool:
    return t.upper() in _NUMERIC or t.upper().startswith("DECIMAL")


def _is_temporal(t: str) -> bool:
    return t.upper().startswith(_TEMPORAL)


@dataclass(slots=True)
class ColumnProfile:
    """One column: DuckDB type and the statistics shown to retrieval and to the model."""

    name: str
    type: str
    non_null: int = 0
    distinct: int = 0
    min: str = ""
    max: str = ""
    mean: str = ""
    #: most frequent values with their counts (text and boolean columns)
    top_values: list[tuple[str, int]] = field(default_factory=list)
    #: first distinct non-null values in file order
    examples: list[str] = field(default_factory=list)

    def stats_text(self, rows: int) -> str:
        """One line of statistics (no name, no type)."""
        parts = [f"{self.non_null} values", f"{rows - self.non_null} empty", f"{self.distinct} distinct"]
        if self.min or self.max:
            parts.append(f"range {self.min} to {self.max}")
        if self.mean:
            parts.append(f"mean {self.mean}")
        text = ", ".join(parts)
        if self.top_values:
            text += "; most frequent: " + ", ".join(f"{v} ({c})" for v, c in self.top_values)
        if self.examples:
            text += "; examples: " + ", ".join(self.examples)
        return text


@dataclass(slots=True)
class TableSchema:
    table_name: str
    file_name: str
    row_count: int
    columns: list[ColumnProfile] = field(default_factory=list)
    sheet: str = ""

    def describe(self) -> str:
        """The schema description the model reads before writing SQL."""
        src = f"file {self.file_name}" + (f", sheet {self.sheet!r}" if self.sheet else "")
        lines = [f"Table {quote_ident(self.table_name)} ({src}): {self.row_count} rows, {len(self.columns)} columns"]
        for c in self.columns:
            lines.append(f"- {quote_ident(c.name)} {c.type}: {c.stats_text(self.row_count)}")
        return "\n".join(lines)


@dataclass(slots=True)
class QueryResult:
    sql: str
    columns: list[str]
    rows: list[tuple[object, ...]]
    truncated: bool
    max_rows: int
    elapsed_ms: float = 0.0

    def to_markdown(self) -> str:
        """The SQL in a fence, a row-count line, then the rows as a Markdown table."""
        if self.truncated:
            count = f"Result: first {len(self.rows)} rows (the query returned more)"
        else:
            count = f"Result: {len(self.rows)} row" + ("" if len(self.rows) == 1 else "s")
        parts = [f"SQL:\n```sql\n{self.sql}\n```", count]
        if self.columns:
            parts.append(render_markdown_table(self.columns, self.rows))
        return "\n\n".join(parts)
