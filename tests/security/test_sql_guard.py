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
