"""Finding 10: the SQL guard's text check missed quoted function names (DuckDB accepts
``"read_csv_auto"(...)``). The DuckDB sandbox held; both layers are kept and the first is fixed."""

from __future__ import annotations

import pytest

from rag_lab.tools.data_analysis import SQLGuardError, check_read_only_sql


@pytest.mark.parametrize(
    "sql, fragment",
    [
        ("""SELECT * FROM "read_csv_auto"('/etc/passwd')""", "function 'read_csv_auto'"),
        ("""SELECT * FROM "READ_TEXT"('/etc/hosts')""", "function 'READ_TEXT'"),
        ("""SELECT "getenv"('HOME')""", "function 'getenv'"),
        ("""SELECT * FROM main."read_csv" ('/etc/passwd')""", "function 'read_csv'"),
        ("""SELECT * FROM "main"."read_json_auto"/* gap */('x.json')""", "function 'read_json_auto'"),
        ("""SELECT * FROM "sqlite_scan"('db.sqlite', 't')""", "function 'sqlite_scan'"),
        ("""SELECT "query"('SELECT 1')""", "function 'query'"),
        ("""SELECT * FROM "glob"('/*')""", "function 'glob'"),
        ("""SELECT * FROM "/etc/passwd\"""", "reading a file by name"),
        ("""SELECT * FROM t JOIN "data.parquet" USING (id)""", "reading a file by name"),
    ],
)
def test_quoted_function_names_and_quoted_file_names_are_refused(sql, fragment):
    with pytest.raises(SQLGuardError, match="not allowed") as info:
        check_read_only_sql(sql)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "sql",
    [
        'SELECT "read_me", count(*) AS n FROM t GROUP BY "read_me"',  # a column, not a call
        'SELECT "city", "visitors" FROM "visits" WHERE "visitors" > 3',
        'SELECT upper("name") FROM t',
    ],
)
def test_quoted_columns_and_tables_still_pass(sql):
    assert check_read_only_sql(sql) == sql


# Issue 27, point 7: the text check passed a quoted file name after a comma in the FROM clause and
# table functions that list DuckDB's catalog / settings or run the parser (the sandbox stopped
# them at run time). Table references are now tracked through the FROM clause: a string literal
# there is refused, and a table function must be on ALLOWED_TABLE_FUNCTIONS.
@pytest.mark.parametrize(
    "sql, fragment",
    [
        ("SELECT * FROM sales, 'file.csv'", "table reference 'file.csv'"),
        ("SELECT * FROM sales s, '/etc/passwd' p", "table reference '/etc/passwd'"),
        ("SELECT * FROM sales JOIN sales t ON sales.a = t.a, 'x.parquet'", "table reference 'x.parquet'"),
        ("SELECT * FROM sales UNION ALL SELECT * FROM sales, 'f.csv'", "table reference 'f.csv'"),
        ("WITH q AS (SELECT 1 AS a) SELECT * FROM q, 'f.csv'", "table reference 'f.csv'"),
        ("SELECT * FROM ('f.csv')", "table reference 'f.csv'"),
        ("SELECT * FROM sales, LATERAL ('f.csv')", "table reference 'f.csv'"),
        ("SELECT * FROM sales, main.'f.csv'", "table reference 'f.csv'"),
        ('SELECT * FROM sales, "data.parquet"', 'table reference "data.parquet"'),
        ("SELECT * FROM (SUMMARIZE 'f.csv')", "table reference 'f.csv'"),
        ("SELECT * FROM (PIVOT 'f.csv' ON a USING sum(b))", "table reference 'f.csv'"),
        ("SELECT * FROM duckdb_extensions()", "function 'duckdb_extensions'"),
        ("SELECT * FROM main.duckdb_settings()", "function 'duckdb_settings'"),
        ('SELECT * FROM sales, "duckdb_tables"()', "function 'duckdb_tables'"),
        ("SELECT * FROM sql_auto_complete('SEL')", "function 'sql_auto_complete'"),
        ("SELECT * FROM sales JOIN LATERAL pragma_table_info('sales') ON true", "function 'pragma_table_info'"),
        ("SELECT * FROM sales CROSS JOIN test_all_types()", "table function 'test_all_types'"),
        ("SELECT * FROM sales, (SELECT * FROM checkpoint_info())", "table function 'checkpoint_info'"),
    ],
)
def test_string_table_references_and_unlisted_table_functions_are_refused(sql, fragment):
    with pytest.raises(SQLGuardError, match="not allowed") as info:
        check_read_only_sql(sql)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a, b FROM sales s, sales t WHERE s.a = t.a AND s.region IN ('n', 's')",
        "SELECT * FROM range(3) r(x)",
        "SELECT * FROM sales, generate_series(1, 3) g(i)",
        "SELECT * FROM sales CROSS JOIN unnest([1, 2]) u(x)",
        "SELECT extract(year FROM make_date(2020, 1, 2)), trim(BOTH 'x' FROM region) FROM sales",
        "SELECT substring(region FROM 1 FOR 2), count(*) FROM sales GROUP BY 1 ORDER BY 1, 2",
        "SELECT * FROM (SELECT a, b FROM sales) x, sales y",
        "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) v(x, y)",
        "SELECT * FROM sales PIVOT (sum(amount) FOR region IN ('n', 's'))",
        "WITH a AS (SELECT 1 AS x), b AS (SELECT 'two' AS y) SELECT * FROM a, b",
        "SELECT (SELECT max(amount) FROM sales), 'literal' FROM sales",
        "SELECT * FROM sales QUALIFY row_number() OVER (PARTITION BY a, b ORDER BY c) = 1",
        'SELECT * FROM "sales", "main"."sales"',
    ],
)
def test_ordinary_from_clauses_still_pass(sql):
    assert check_read_only_sql(sql) == sql
