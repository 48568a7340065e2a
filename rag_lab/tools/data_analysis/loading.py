"""DataAnalysisTool: loading one CSV / Excel file into a sandboxed in-memory DuckDB, profiling it,
running guarded queries under a timeout."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rag_lab.tools.data_analysis.errors import (
    DATA_FILE_SUFFIXES,
    DEFAULT_EXAMPLES,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    DataAnalysisError,
    QueryTimeout,
    _first_line,
)
from rag_lab.tools.data_analysis.formatting import (
    ColumnProfile,
    QueryResult,
    TableSchema,
    _is_numeric,
    _is_temporal,
    format_value,
    parse_analysis_input,
    quote_ident,
    table_name_for,
)
from rag_lab.tools.data_analysis.guard import check_read_only_sql

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

T = TypeVar("T")


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

    def _read_into(self, con: duckdb.DuckDBPyConnection) -> str:
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

    def _read_excel(self) -> tuple[pd.DataFrame, str]:
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
    def _timed(self, con: duckdb.DuckDBPyConnection, fn: Callable[[], T], what: str) -> T:
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

            def run() -> tuple[list[str], list[tuple[object, ...]]]:
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

    def execute(self, raw: str | Mapping[str, object]) -> str:
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


def _stringify_mixed(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns become text (None stays NULL), so DuckDB can scan the frame."""
    frame = frame.copy()
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return frame
