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
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

#: file suffixes (lower-case) that DATA_ANALYSIS treats as data files (spec §4.10 step 1)
DATA_FILE_SUFFIXES = (".csv", ".xlsx", ".xls")

DEFAULT_MAX_ROWS = 50
DEFAULT_TIMEOUT_S = 30.0
#: example values kept per column (schema description and column chunks)
DEFAULT_EXAMPLES = 5
#: longest cell text shown in a Markdown result table
MAX_CELL_CHARS = 200

T = TypeVar("T")


class DataAnalysisError(RuntimeError):
    """Loading the file or running the query failed; the message names the file / SQL."""


class SQLGuardError(DataAnalysisError, ValueError):
    """The SQL is not a single read-only SELECT / WITH query; the message says what was found."""


class QueryTimeout(DataAnalysisError):
    """The query (or the load) ran longer than the tool's timeout and was interrupted."""


# ---- the SQL guard ---------------------------------------------------------------------------
FORBIDDEN_KEYWORDS = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "MERGE",
        "UPSERT",
        "DROP",
        "CREATE",
        "ALTER",
        "TRUNCATE",
        "COPY",
        "ATTACH",
        "DETACH",
        "PRAGMA",
        "INSTALL",
        "LOAD",
        "SET",
        "RESET",
        "CALL",
        "EXPORT",
        "IMPORT",
        "VACUUM",
        "CHECKPOINT",
        "GRANT",
        "REVOKE",
        "BEGIN",
        "COMMIT",
        "ROLLBACK",
        "ABORT",
        "USE",
        "PREPARE",
        "EXECUTE",
        "DEALLOCATE",
    }
)
_FORBIDDEN_FUNCTIONS = frozenset(
    {"glob", "sniff_csv", "query", "query_table", "getenv", "load_extension", "duckdb_secrets", "http_get", "http_post"}
)
_FORBIDDEN_FUNCTION_PREFIXES = (
    "read_",
    "parquet_",
    "sqlite_",
    "postgres_",
    "mysql_",
    "iceberg_",
    "delta_",
    "json_execute",
)
_FORBIDDEN_FUNCTION_SUFFIXES = ("_scan",)
# words written unquoted in a schema description would collide with these; quote them
_RESERVED = FORBIDDEN_KEYWORDS | frozenset(
    {
        "ALL",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "BETWEEN",
        "BY",
        "CASE",
        "CAST",
        "COLUMN",
        "DATE",
        "DEFAULT",
        "DESC",
        "DISTINCT",
        "ELSE",
        "END",
        "EXCEPT",
        "EXISTS",
        "FALSE",
        "FETCH",
        "FOR",
        "FROM",
        "FULL",
        "GROUP",
        "HAVING",
        "IN",
        "INNER",
        "INTERSECT",
        "INTERVAL",
        "INTO",
        "IS",
        "JOIN",
        "KEY",
        "LEFT",
        "LIKE",
        "LIMIT",
        "NATURAL",
        "NOT",
        "NULL",
        "OFFSET",
        "ON",
        "OR",
        "ORDER",
        "OUTER",
        "OVER",
        "PIVOT",
        "QUALIFY",
        "RIGHT",
        "ROW",
        "ROWS",
        "SELECT",
        "TABLE",
        "THEN",
        "TIME",
        "TIMESTAMP",
        "TO",
        "TRUE",
        "UNION",
        "UNPIVOT",
        "USING",
        "VALUES",
        "WHEN",
        "WHERE",
        "WINDOW",
        "WITH",
        "YEAR",
        "MONTH",
        "DAY",
        "POSITION",
        "USER",
    }
)


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "word" | "string" | "ident" | "semicolon" | "punct"
    text: str
    pos: int


def _tokenize(sql: str) -> list[_Tok]:
    """Tokens outside comments. Strings end at the first unescaped quote (``''`` escapes; a
    backslash does not), which never ends a string later than DuckDB does."""
    out: list[_Tok] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                raise SQLGuardError(f"unterminated /* comment at character {i}")
            i = j + 2
        elif c in ("'", '"'):
            j = i + 1
            while True:
                k = sql.find(c, j)
                if k < 0:
                    what = "string literal" if c == "'" else "quoted identifier"
                    raise SQLGuardError(f"unterminated {what} starting at character {i}")
                if k + 1 < n and sql[k + 1] == c:  # doubled quote: an escaped quote
                    j = k + 2
                    continue
                break
            out.append(_Tok("string" if c == "'" else "ident", sql[i : k + 1], i))
            i = k + 1
        elif c == "$":
            raise SQLGuardError(f"'$' at character {i}: dollar-quoted strings and $ parameters are not allowed")
        elif c.isalpha() or c == "_":
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            out.append(_Tok("word", sql[i:j], i))
            i = j
        elif c == ";":
            out.append(_Tok("semicolon", c, i))
            i += 1
        else:
            out.append(_Tok("punct", c, i))
            i += 1
    return out


def _forbidden_function(name: str) -> bool:
    low = name.lower()
    return (
        low in _FORBIDDEN_FUNCTIONS
        or low.startswith(_FORBIDDEN_FUNCTION_PREFIXES)
        or low.endswith(_FORBIDDEN_FUNCTION_SUFFIXES)
    )


def check_read_only_sql(sql: str) -> str:
    """The query without its trailing ``;`` when ``sql`` is one read-only SELECT / WITH query;
    otherwise :class:`SQLGuardError` saying what is not allowed (see the module docstring)."""
    if not isinstance(sql, str):
        raise SQLGuardError(f"sql must be a string, got {type(sql).__name__}")
    toks = _tokenize(sql)
    if not toks:
        raise SQLGuardError("empty SQL")
    end = len(toks)
    while end and toks[end - 1].kind == "semicolon":
        end -= 1
    if end == 0:
        raise SQLGuardError("empty SQL (only ';')")
    if end < len(toks) - 1:
        raise SQLGuardError("more than one trailing ';'")
    body = toks[:end]
    for t in body:
        if t.kind == "semicolon":
            raise SQLGuardError(f"';' at character {t.pos}: only one statement is allowed")
    first = next((t for t in body if not (t.kind == "punct" and t.text == "(")), None)
    if first is None or first.kind != "word" or first.text.upper() not in ("SELECT", "WITH"):
        got = first.text if first is not None else "("
        raise SQLGuardError(f"only a single SELECT or WITH query is allowed; the SQL starts with {got!r}")
    for idx, t in enumerate(body):
        if t.kind != "word":
            continue
        up = t.text.upper()
        if up in FORBIDDEN_KEYWORDS:
            raise SQLGuardError(
                f"keyword {t.text!r} at character {t.pos} is not allowed in a read-only query "
                f"(a column with that name must be double-quoted)"
            )
        nxt = body[idx + 1] if idx + 1 < len(body) else None
        if nxt is not None and nxt.kind == "punct" and nxt.text == "(" and _forbidden_function(t.text):
            raise SQLGuardError(f"function {t.text!r} at character {t.pos} reads files or runs SQL; not allowed")
        if up in ("FROM", "JOIN") and nxt is not None and nxt.kind == "string":
            raise SQLGuardError(f"{t.text} {nxt.text} at character {t.pos}: reading a file by name is not allowed")
    cleaned = sql[: toks[end].pos].rstrip() if end < len(toks) else sql.strip()
    import duckdb

    try:
        statements = duckdb.extract_statements(cleaned)
    except duckdb.Error as exc:
        raise SQLGuardError(f"SQL does not parse: {_first_line(exc)}") from None
    if len(statements) != 1:
        raise SQLGuardError(f"expected one statement, found {len(statements)}")
    if statements[0].type != duckdb.StatementType.SELECT:
        raise SQLGuardError(f"only SELECT statements are allowed, got {statements[0].type.name}")
    return cleaned.strip()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---- the model's input ----------------------------------------------------------------------
@dataclass(slots=True)
class AnalysisInput:
    """What the model asked for: ``{"knowledge_id", "sql"}`` (``sql`` empty = no analysis)."""

    knowledge_id: str = ""
    sql: str = ""


_SQL_KEYS = ("sql", "query", "sql_query", "statement")
_KID_KEYS = ("knowledge_id", "knowledgeId", "knowledge", "file_id", "id")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)```", re.S)


def _from_mapping(obj: Mapping[str, Any]) -> AnalysisInput:
    sql: Any = ""
    for k in _SQL_KEYS:
        if k in obj and obj[k] is not None:
            sql = obj[k]
            break
    if not isinstance(sql, str):
        raise DataAnalysisError(f"model reply: field 'sql' = {sql!r} must be a string")
    kid: Any = ""
    for k in _KID_KEYS:
        if obj.get(k) is not None:
            kid = obj[k]
            break
    return AnalysisInput(knowledge_id=str(kid).strip(), sql=sql.strip())


def parse_analysis_input(raw: str | Mapping[str, Any]) -> AnalysisInput:
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
def format_value(v: Any) -> str:
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


def _cell(v: Any) -> str:
    s = " ".join(format_value(v).split())
    if len(s) > MAX_CELL_CHARS:
        s = s[: MAX_CELL_CHARS - 1] + "…"
    return s.replace("\\", "\\\\").replace("|", "\\|")


def render_markdown_table(columns: list[str], rows: list[tuple]) -> str:
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
    rows: list[tuple]
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


# ---- the tool -------------------------------------------------------------------------------
class DataAnalysisTool:
    """One CSV / Excel file as the DuckDB table :attr:`table_name` of a private in-memory
    database. ``load()`` reads it (CSV by ``read_csv_auto``, Excel through pandas + openpyxl) and
    profiles it; ``run_sql()`` runs one guarded SELECT; ``execute()`` takes the model's raw reply."""

    def __init__(
        self,
        path: str | Path,
        *,
        file_name: str | None = None,
        table_name: str | None = None,
        max_rows: int = DEFAULT_MAX_ROWS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        examples: int = DEFAULT_EXAMPLES,
        sheet: int | str = 0,
        threads: int = 2,
        memory_limit: str = "1GB",
    ) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows={max_rows} must be >= 1")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s} must be > 0")
        self.path = Path(path)
        self.file_name = file_name or self.path.name
        suffix = Path(self.file_name).suffix.lower() or self.path.suffix.lower()
        if suffix not in DATA_FILE_SUFFIXES:
            raise DataAnalysisError(
                f"{self.path}: unsupported data file type {suffix!r} (supported: {', '.join(DATA_FILE_SUFFIXES)})"
            )
        self.kind = suffix.lstrip(".")
        self.table_name = table_name or table_name_for(self.file_name)
        self.max_rows = int(max_rows)
        self.timeout_s = float(timeout_s)
        self.examples = int(examples)
        self.sheet = sheet
        self.threads = max(1, int(threads))
        self.memory_limit = memory_limit
        self._con: Any = None
        self._schema: TableSchema | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DataAnalysisTool({str(self.path)!r}, table={self.table_name!r})"

    def __enter__(self) -> DataAnalysisTool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    # -- loading ------------------------------------------------------------------------------
    @property
    def schema(self) -> TableSchema:
        return self.load()

    def describe_schema(self) -> str:
        return self.load().describe()

    def load(self) -> TableSchema:
        """Read the file into DuckDB, sandbox the connection, profile the table (once)."""
        with self._lock:
            if self._schema is not None:
                return self._schema
            import duckdb

            if not self.path.is_file():
                raise DataAnalysisError(f"{self.path}: data file not found")
            con = duckdb.connect(":memory:")
            try:
                con.execute(f"SET threads = {self.threads}")
                con.execute("SET memory_limit = ?", [self.memory_limit])
                sheet_name = self._read_into(con)
                con.execute("SET enable_external_access = false")
                con.execute("SET lock_configuration = true")
                self._con = con
                schema = self._timed(con, lambda: self._profile(sheet_name), "profiling the table")
            except DataAnalysisError:
                con.close()
                self._con = None
                raise
            except duckdb.Error as exc:
                con.close()
                self._con = None
                raise DataAnalysisError(f"{self.path}: cannot load as a table: {_first_line(exc)}") from None
            if not schema.columns:
                self.close()
                raise DataAnalysisError(f"{self.path}: the table has no columns")
            self._schema = schema
            return schema

    def _read_into(self, con: Any) -> str:
        t = quote_ident(self.table_name)
        if self.kind == "csv":
            self._timed(
                con,
                lambda: con.execute(
                    f"CREATE TABLE {t} AS SELECT * FROM read_csv_auto(?, sample_size = -1)", [str(self.path)]
                ),
                "loading the CSV file",
            )
            return ""
        frame, sheet_name = self._read_excel()
        con.register("__rag_lab_frame", frame)
        try:
            try:
                con.execute(f"CREATE TABLE {t} AS SELECT * FROM __rag_lab_frame")
            except Exception:
                # mixed Python types in one column: keep it as text
                con.unregister("__rag_lab_frame")
                frame = _stringify_mixed(frame)
                con.register("__rag_lab_frame", frame)
                con.execute(f"CREATE TABLE {t} AS SELECT * FROM __rag_lab_frame")
        finally:
            con.unregister("__rag_lab_frame")
        return sheet_name

    def _read_excel(self) -> tuple[Any, str]:
        import pandas as pd

        engine = "openpyxl" if self.kind == "xlsx" else None
        try:
            book = pd.ExcelFile(self.path, engine=engine)
        except ImportError as exc:
            need = "openpyxl" if self.kind == "xlsx" else "xlrd"
            raise DataAnalysisError(
                f"{self.path}: reading .{self.kind} files needs the '{need}' package ({exc})"
            ) from None
        except Exception as exc:
            raise DataAnalysisError(f"{self.path}: cannot open as an Excel workbook: {exc}") from None
        with book:
            names = list(book.sheet_names)
            if isinstance(self.sheet, int):
                if not 0 <= self.sheet < len(names):
                    raise DataAnalysisError(f"{self.path}: sheet index {self.sheet} out of range ({len(names)} sheets)")
                sheet_name = names[self.sheet]
            else:
                if self.sheet not in names:
                    raise DataAnalysisError(f"{self.path}: no sheet {self.sheet!r} (sheets: {', '.join(names)})")
                sheet_name = self.sheet
            frame = pd.read_excel(book, sheet_name=sheet_name)
        frame.columns = _unique_names([str(c) for c in frame.columns])
        return frame, str(sheet_name)

    def _profile(self, sheet_name: str) -> TableSchema:
        con, t = self._con, quote_ident(self.table_name)
        rows = int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
        described = con.execute(f"DESCRIBE {t}").fetchall()
        cols: list[ColumnProfile] = []
        for name, ctype, *_ in described:
            q = quote_ident(name)
            prof = ColumnProfile(name=name, type=str(ctype))
            non_null, distinct = con.execute(f"SELECT count({q}), count(DISTINCT {q}) FROM {t}").fetchone()
            prof.non_null, prof.distinct = int(non_null), int(distinct)
            if _is_numeric(prof.type) or _is_temporal(prof.type):
                lo, hi = con.execute(f"SELECT min({q}), max({q}) FROM {t}").fetchone()
                if lo is not None:
                    prof.min, prof.max = format_value(lo), format_value(hi)
                if _is_numeric(prof.type) and prof.non_null:
                    mean = con.execute(f"SELECT avg({q}) FROM {t}").fetchone()[0]
                    prof.mean = format_value(round(float(mean), 4)) if mean is not None else ""
            elif prof.distinct < rows or prof.type.upper() == "BOOLEAN":
                top = con.execute(
                    f"SELECT {q}, count(*) AS n FROM {t} WHERE {q} IS NOT NULL GROUP BY {q} "
                    f"ORDER BY n DESC, {q} LIMIT {self.examples}"
                ).fetchall()
                prof.top_values = [(format_value(v), int(n)) for v, n in top if n > 1]
            if not prof.top_values:
                first = con.execute(
                    f"SELECT {q} FROM (SELECT {q}, min(rowid) AS r FROM {t} WHERE {q} IS NOT NULL GROUP BY {q}) "
                    f"ORDER BY r LIMIT {self.examples}"
                ).fetchall()
                prof.examples = [format_value(v) for (v,) in first]
            cols.append(prof)
        return TableSchema(self.table_name, self.file_name, rows, cols, sheet=sheet_name)

    # -- querying -----------------------------------------------------------------------------
    def _timed(self, con: Any, fn: Callable[[], T], what: str) -> T:
        """``fn()`` with ``con.interrupt()`` armed after :attr:`timeout_s`."""
        import duckdb

        timer = threading.Timer(self.timeout_s, con.interrupt)
        timer.daemon = True
        timer.start()
        try:
            return fn()
        except duckdb.InterruptException:
            raise QueryTimeout(f"{what} exceeded the {self.timeout_s:g}s timeout and was interrupted") from None
        finally:
            timer.cancel()

    def run_sql(self, sql: str) -> QueryResult:
        """Run one guarded read-only query; at most :attr:`max_rows` rows are fetched."""
        import duckdb

        cleaned = check_read_only_sql(sql)
        self.load()
        with self._lock:
            con = self._con
            if con is None:
                raise DataAnalysisError(f"{self}: the tool is closed")
            t0 = time.perf_counter()

            def run() -> tuple[list[str], list[tuple]]:
                cur = con.execute(cleaned)
                names = [d[0] for d in (cur.description or [])]
                return names, cur.fetchmany(self.max_rows + 1)

            try:
                columns, rows = self._timed(con, run, "the query")
            except duckdb.Error as exc:
                raise DataAnalysisError(f"query failed: {_first_line(exc)}\nSQL: {cleaned}") from None
        truncated = len(rows) > self.max_rows
        return QueryResult(
            sql=cleaned,
            columns=columns,
            rows=[tuple(r) for r in rows[: self.max_rows]],
            truncated=truncated,
            max_rows=self.max_rows,
            elapsed_ms=(time.perf_counter() - t0) * 1000.0,
        )

    def execute(self, raw: str | Mapping[str, Any]) -> str:
        """Run the query in the model's raw reply (``{"knowledge_id", "sql"}``) and return the
        tool output: a heading naming the file and table, the SQL, and the rows in Markdown. An
        empty ``sql`` raises :class:`DataAnalysisError` (the model chose no analysis)."""
        request = parse_analysis_input(raw)
        if not request.sql:
            raise DataAnalysisError("the model returned an empty 'sql': no analysis needed")
        result = self.run_sql(request.sql)
        return f"Data analysis of {self.file_name} (table {quote_ident(self.table_name)})\n\n" + result.to_markdown()


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        n = n.strip() or "column"
        key = n.lower()
        if key in seen:
            seen[key] += 1
            n = f"{n}_{seen[key]}"
            key = n.lower()
        seen.setdefault(key, 0)
        out.append(n)
    return out


def _stringify_mixed(frame: Any) -> Any:
    """Object columns become text (None stays NULL), so DuckDB can scan the frame."""
    frame = frame.copy()
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return frame


__all__ = [
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
