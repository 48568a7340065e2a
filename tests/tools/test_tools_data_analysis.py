"""DataAnalysisTool: the read-only SQL guard (concrete and fuzzed), the DuckDB sandbox, schema
description, Markdown output, timeouts and the tolerant reading of the model's reply."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rag_lab.tools.data_analysis import (
    FORBIDDEN_KEYWORDS,
    AnalysisInput,
    DataAnalysisError,
    DataAnalysisTool,
    QueryTimeout,
    SQLGuardError,
    check_read_only_sql,
    format_value,
    parse_analysis_input,
    quote_ident,
    render_markdown_table,
    table_name_for,
)

SALES = (
    "region,month,amount,units,note\n"
    "North,2024-01-01,100.5,3,ok\n"
    "South,2024-01-01,200,4,\n"
    "North,2024-02-01,150,2,late|early\n"
    "East,2024-02-01,50.25,1,ok\n"
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    (d / "sales.csv").write_text(SALES, encoding="utf-8")
    (d / "secret.csv").write_text("secret\nTOPSECRET\n", encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def tool(files):
    t = DataAnalysisTool(files / "sales.csv")
    t.load()
    yield t
    t.close()


# ---- the guard: concrete cases ------------------------------------------------------------------
@pytest.mark.parametrize(
    "sql, cleaned",
    [
        ("SELECT 1", "SELECT 1"),
        ("  select region from sales ;  ", "select region from sales"),
        (
            "WITH t AS (SELECT * FROM sales) SELECT count(*) FROM t;",
            "WITH t AS (SELECT * FROM sales) SELECT count(*) FROM t",
        ),
        ("(SELECT 1) UNION ALL (SELECT 2)", "(SELECT 1) UNION ALL (SELECT 2)"),
        ("SELECT 'DROP TABLE sales; --' AS s", "SELECT 'DROP TABLE sales; --' AS s"),
        ('SELECT "delete" FROM (SELECT 1 AS "delete")', 'SELECT "delete" FROM (SELECT 1 AS "delete")'),
        ("SELECT 'it''s; fine' AS s -- trailing note", "SELECT 'it''s; fine' AS s -- trailing note"),
        ("SELECT 1; -- done", "SELECT 1"),
        ("SELECT replace(region, 'N', 'n') FROM sales", "SELECT replace(region, 'N', 'n') FROM sales"),
        ("SELECT * FROM sales WHERE note = 'read_csv(''x'')'", "SELECT * FROM sales WHERE note = 'read_csv(''x'')'"),
    ],
)
def test_guard_accepts_single_read_only_queries(sql, cleaned):
    assert check_read_only_sql(sql) == cleaned


@pytest.mark.parametrize(
    "sql, message",
    [
        ("", "empty SQL"),
        (" ; ", r"empty SQL \(only ';'\)"),
        ("SELECT 1;;", "more than one trailing ';'"),
        ("DROP TABLE sales", "starts with 'DROP'"),
        ("DELETE FROM sales", "starts with 'DELETE'"),
        ("PRAGMA version", "starts with 'PRAGMA'"),
        ("ATTACH 'x.db' AS x", "starts with 'ATTACH'"),
        ("COPY sales TO '/tmp/out.csv'", "starts with 'COPY'"),
        ("EXPLAIN SELECT 1", "starts with 'EXPLAIN'"),
        ("FROM sales", "starts with 'FROM'"),
        ("SELECT 1; DROP TABLE sales", "';' at character 8: only one statement"),
        ("SELECT 1 /* c */ ; SELECT 2", "only one statement"),
        ("SELECT 1 -- c\n; DELETE FROM sales", "only one statement"),
        ("WITH x AS (DELETE FROM sales RETURNING *) SELECT * FROM x", "keyword 'DELETE' at character 11"),
        ("SELECT * FROM sales WHERE 1=1 OR (select 1) IN (insert into sales values (1))", "keyword 'insert'"),
        ("SELECT load FROM sales", "keyword 'load'.*must be double-quoted"),
        ("SELECT * FROM read_csv_auto('/etc/passwd')", "function 'read_csv_auto'"),
        ("SELECT * FROM READ_PARQUET ('x.parquet')", "function 'READ_PARQUET'"),
        ("SELECT * FROM glob('/tmp/*')", "function 'glob'"),
        ("SELECT * FROM sqlite_scan('x.db', 't')", "function 'sqlite_scan'"),
        ("SELECT * FROM query('SELECT 1')", "function 'query'"),
        ("SELECT * FROM '/etc/passwd'", "reading a file by name"),
        ("SELECT * FROM sales JOIN 'other.csv' USING (region)", "reading a file by name"),
        ("SELECT $$ ' $$; DROP TABLE sales", "dollar-quoted"),
        ("SELECT 'unterminated", "unterminated string literal"),
        ('SELECT "unterminated', "unterminated quoted identifier"),
        ("SELECT 1 /* open", r"unterminated /\* comment"),
        ("SELECT FROM WHERE", "does not parse"),
        ("SELECT 1 UNION DROP", "keyword 'DROP'"),
    ],
)
def test_guard_rejects_with_a_clear_reason(sql, message):
    with pytest.raises(SQLGuardError, match=message):
        check_read_only_sql(sql)


def test_guard_rejects_non_strings():
    with pytest.raises(SQLGuardError, match="must be a string, got NoneType"):
        check_read_only_sql(None)  # type: ignore[arg-type]


# ---- the guard: fuzzed ----------------------------------------------------------------------
SAFE = [
    "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total DESC",
    "SELECT count(*) AS n FROM sales",
    "WITH m AS (SELECT month, avg(amount) AS a FROM sales GROUP BY month) SELECT * FROM m ORDER BY month",
    "SELECT note, count(*) FROM sales WHERE note IS NOT NULL GROUP BY note ORDER BY note",
    "SELECT max(units) - min(units) AS spread FROM sales",
]
FORBIDDEN = [
    "DROP TABLE sales",
    "DELETE FROM sales",
    "INSERT INTO sales VALUES ('X', DATE '2024-01-01', 1, 1, 'x')",
    "UPDATE sales SET amount = 0",
    "CREATE TABLE t AS SELECT 1",
    "ALTER TABLE sales ADD COLUMN x INT",
    "COPY sales TO 'out.csv'",
    "ATTACH 'other.db' AS o",
    "DETACH o",
    "PRAGMA database_list",
    "SET threads = 1",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CALL pragma_version()",
    "TRUNCATE sales",
    "EXPORT DATABASE 'dir'",
    "SELECT * FROM read_csv_auto('secret.csv')",
    "SELECT * FROM 'secret.csv'",
    "SELECT * FROM read_text('secret.csv')",
    "SELECT * FROM glob('*')",
]
JOINERS = [";", "; ", ";\n", " ;", "/* x */;", ";-- c\n", "\n;\n", ";/*;*/"]


def _mangle_case(text: str, flips: list[bool]) -> str:
    """Flip the case of letters outside quotes (keywords are case-insensitive)."""
    out, quote, k = [], None, 0
    for ch in text:
        if quote:
            out.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
            out.append(ch)
            continue
        flip = flips[k % len(flips)] if flips else False
        k += 1
        out.append(ch.swapcase() if flip and ch.isalpha() else ch)
    return "".join(out)


@settings(max_examples=300)
@given(
    safe=st.sampled_from(SAFE),
    bad=st.sampled_from(FORBIDDEN),
    joiner=st.sampled_from(JOINERS),
    shape=st.sampled_from(["alone", "after", "before", "cte", "subquery", "union"]),
    flips=st.lists(st.booleans(), min_size=1, max_size=7),
)
def test_fuzz_any_forbidden_statement_is_rejected(safe, bad, joiner, shape, flips):
    sql = {
        "alone": bad,
        "after": safe + joiner + bad,
        "before": bad + joiner + safe,
        "cte": f"WITH x AS ({bad}) {safe}",
        "subquery": f"SELECT * FROM ({bad}) AS x",
        "union": f"{safe} UNION ALL {bad}",
    }[shape]
    with pytest.raises(SQLGuardError):
        check_read_only_sql(_mangle_case(sql, flips))


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    i=st.integers(0, len(SAFE) - 1),
    flips=st.lists(st.booleans(), min_size=1, max_size=5),
    lead=st.sampled_from(["", " ", "\n\t", "-- note\n", "/* c */ "]),
    tail=st.sampled_from(["", ";", " ; ", ";\n-- end", "\n"]),
)
def test_fuzz_safe_queries_pass_and_give_the_same_rows(tool, i, flips, lead, tail):
    sql = lead + _mangle_case(SAFE[i], flips) + tail
    assert tool.run_sql(sql).rows == tool.run_sql(SAFE[i]).rows


PREFIXES = ["SELECT", "select", "WITH x AS (SELECT * FROM sales) SELECT", "(SELECT"]
VOCAB = [
    "*",
    "* FROM sales",
    "FROM sales",
    "FROM x",
    ", 'SECRET_PATH'",
    "FROM sales , 'SECRET_PATH'",
    "sales",
    "x",
    "AS",
    "(",
    ")",
    ",",
    ";",
    "--",
    "/*",
    "*/",
    "\n",
    "'a;b'",
    "'",
    '"region"',
    "region",
    "count(*)",
    "WHERE",
    "1=1",
    "UNION ALL SELECT",
    "DROP",
    "TABLE",
    "DELETE",
    "INSERT",
    "INTO",
    "VALUES",
    "(1)",
    "COPY",
    "TO",
    "'OUT_PATH'",
    "ATTACH",
    "PRAGMA",
    "SET",
    "read_csv_auto",
    "read_text",
    "glob",
    "('SECRET_PATH')",
    "'SECRET_PATH'",
    "JOIN",
    "USING (region)",
    "query",
    "E'\\'",
    "$$",
    "LIMIT 1",
    "1",
]


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(PREFIXES), words=st.lists(st.sampled_from(VOCAB), min_size=0, max_size=10))
def test_fuzz_whatever_passes_the_guard_cannot_write_or_read_files(tool, files, prefix, words):
    """Token soup: when the guard accepts, running it never changes the table, never writes the
    COPY target and never shows the secret file's content."""
    out_path = files / "copied.csv"
    sql = (
        " ".join([prefix, *words]).replace("SECRET_PATH", str(files / "secret.csv")).replace("OUT_PATH", str(out_path))
    )
    try:
        check_read_only_sql(sql)
    except SQLGuardError:
        return
    try:
        text = tool.run_sql(sql).to_markdown()
    except DataAnalysisError:
        text = ""
    assert "TOPSECRET" not in text
    assert not out_path.exists()
    assert tool.run_sql("SELECT count(*) FROM sales").rows == [(4,)]
    tables = tool.run_sql("SELECT table_name FROM information_schema.tables ORDER BY 1").rows
    assert tables == [("sales",)]


def test_forbidden_keywords_cover_the_brief():
    for kw in (
        "INSERT",
        "UPDATE",
        "DELETE",
        "DROP",
        "CREATE",
        "ALTER",
        "COPY",
        "ATTACH",
        "PRAGMA",
        "INSTALL",
        "LOAD",
        "SET",
    ):
        assert kw in FORBIDDEN_KEYWORDS


# ---- the sandbox (second layer) ------------------------------------------------------------
def test_connection_cannot_touch_files_even_without_the_guard(tool, files):
    import duckdb

    con = tool._con  # the guard is bypassed on purpose
    for sql in (
        f"SELECT * FROM read_text('{files / 'secret.csv'}')",
        f"COPY sales TO '{files / 'out.csv'}'",
        f"ATTACH '{files / 'x.db'}' AS x",
        "SET enable_external_access = true",
    ):
        with pytest.raises(duckdb.Error):
            con.execute(sql)
    assert not (files / "out.csv").exists() and not (files / "x.db").exists()


def test_a_file_name_after_a_comma_is_refused_by_both_layers(tool, files):
    """Issue 27: the text check used to pass a file name after a comma in the FROM clause (only
    the sandbox stopped it); now the guard refuses it, and the sandbox still does on its own."""
    import duckdb

    sql = f"SELECT * FROM sales, '{files / 'secret.csv'}'"
    with pytest.raises(SQLGuardError, match="reading a file by name is not allowed"):
        check_read_only_sql(sql)
    with pytest.raises(DataAnalysisError, match="reading a file by name is not allowed"):
        tool.run_sql(sql)
    with pytest.raises(duckdb.Error, match="file system operations are disabled"):
        tool._con.execute(sql)  # the guard is bypassed on purpose


# ---- schema and output ----------------------------------------------------------------------
def test_schema_description(tool):
    text = tool.describe_schema()
    lines = text.splitlines()
    assert lines[0] == "Table sales (file sales.csv): 4 rows, 5 columns"
    assert lines[1] == "- region VARCHAR: 4 values, 0 empty, 3 distinct; most frequent: North (2)"
    assert (
        lines[2]
        == '- "month" DATE: 4 values, 0 empty, 2 distinct, range 2024-01-01 to 2024-02-01; examples: 2024-01-01, 2024-02-01'
    )
    assert (
        lines[3]
        == "- amount DOUBLE: 4 values, 0 empty, 4 distinct, range 50.25 to 200, mean 125.1875; examples: 100.5, 200, 150, 50.25"
    )
    assert lines[4] == "- units BIGINT: 4 values, 0 empty, 4 distinct, range 1 to 4, mean 2.5; examples: 3, 4, 2, 1"
    assert lines[5] == "- note VARCHAR: 3 values, 1 empty, 2 distinct; most frequent: ok (2)"


def test_execute_renders_sql_and_markdown(tool):
    out = tool.execute(
        '{"knowledge_id": "sales.csv", "sql": "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total DESC;"}'
    )
    assert out == (
        "Data analysis of sales.csv (table sales)\n\n"
        "SQL:\n```sql\nSELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total DESC\n```\n\n"
        "Result: 3 rows\n\n"
        "| region | total |\n| --- | --- |\n| North | 250.5 |\n| South | 200 |\n| East | 50.25 |"
    )


def test_rows_are_capped_and_cells_escaped(files):
    with DataAnalysisTool(files / "sales.csv", max_rows=2) as t:
        res = t.run_sql("SELECT note, units FROM sales ORDER BY units DESC")
        assert res.truncated and len(res.rows) == 2
        assert res.to_markdown().endswith(
            "Result: first 2 rows (the query returned more)\n\n| note | units |\n| --- | --- |\n| NULL | 4 |\n| ok | 3 |"
        )
        one = t.run_sql("SELECT note FROM sales WHERE units = 2")
        assert not one.truncated and "Result: 1 row\n" in one.to_markdown()
        assert one.to_markdown().endswith("| late\\|early |")
        empty = t.run_sql("SELECT * FROM sales WHERE units > 100")
        assert "Result: 0 rows" in empty.to_markdown() and empty.to_markdown().endswith(
            "| --- | --- | --- | --- | --- |"
        )


def test_markdown_table_and_values():
    assert render_markdown_table(["a|b", "c"], [(None, "x\ny"), (True, 2.0)]) == (
        "| a\\|b | c |\n| --- | --- |\n| NULL | x y |\n| true | 2 |"
    )
    assert format_value(0.1 + 0.2) == "0.3" and format_value(1e20) == "1e+20" and format_value(7.0) == "7"
    import datetime as dt
    import decimal

    assert format_value(dt.datetime(2024, 1, 2, 3, 4)) == "2024-01-02 03:04:00"
    assert format_value(decimal.Decimal("12.50")) == "12.50" and format_value(decimal.Decimal("3.00")) == "3"
    long = render_markdown_table(["t"], [("z" * 500,)])
    assert long.endswith("z" * 199 + "… |")


def test_query_errors_and_timeouts(files):
    with DataAnalysisTool(files / "sales.csv", timeout_s=1.0) as t:
        with pytest.raises(DataAnalysisError, match=r"query failed: Binder Error.*\nSQL: SELECT nope FROM sales"):
            t.run_sql("SELECT nope FROM sales")
        with pytest.raises(QueryTimeout, match="exceeded the 1s timeout"):
            t.run_sql("SELECT count(*) FROM range(100000000) a, range(100000) b")
        assert t.run_sql("SELECT count(*) FROM sales").rows == [(4,)]  # still usable
        with pytest.raises(DataAnalysisError, match="empty 'sql'"):
            t.execute('{"knowledge_id": "k", "sql": ""}')


def test_load_errors(tmp_path):
    with pytest.raises(DataAnalysisError, match=r"missing\.csv: data file not found"):
        DataAnalysisTool(tmp_path / "missing.csv").load()
    with pytest.raises(DataAnalysisError, match=r"unsupported data file type '\.txt'"):
        DataAnalysisTool(tmp_path / "notes.txt")
    (tmp_path / "bad.xlsx").write_bytes(b"garbage")
    with pytest.raises(DataAnalysisError, match=r"bad\.xlsx: cannot open as an Excel workbook"):
        DataAnalysisTool(tmp_path / "bad.xlsx").load()
    with pytest.raises(ValueError, match="max_rows=0"):
        DataAnalysisTool(tmp_path / "x.csv", max_rows=0)


# ---- the model's reply ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"knowledge_id": "k1", "sql": "SELECT 1"}', AnalysisInput("k1", "SELECT 1")),
        ('```json\n{"knowledge_id": "k1", "sql": " SELECT 2 "}\n```', AnalysisInput("k1", "SELECT 2")),
        ('Here you go: {"knowledgeId": "k2", "query": "SELECT 3"} hope it helps', AnalysisInput("k2", "SELECT 3")),
        ('{"knowledge_id": "k", "sql": ""}', AnalysisInput("k", "")),
        ('{"knowledge_id": "k", "sql": null}', AnalysisInput("k", "")),
        ("```sql\nSELECT 4\n```", AnalysisInput("", "SELECT 4")),
        ("with t as (select 1) select * from t", AnalysisInput("", "with t as (select 1) select * from t")),
        ({"knowledge_id": 7, "sql": "SELECT 5"}, AnalysisInput("7", "SELECT 5")),
    ],
)
def test_parse_analysis_input_is_tolerant(raw, expected):
    assert parse_analysis_input(raw) == expected


def test_parse_analysis_input_rejects_garbage():
    with pytest.raises(DataAnalysisError, match="not a JSON object with 'sql'"):
        parse_analysis_input("I cannot help with that.")
    with pytest.raises(DataAnalysisError, match="field 'sql' = 3 must be a string"):
        parse_analysis_input('{"sql": 3}')


# ---- names ----------------------------------------------------------------------------------
def test_table_names():
    assert table_name_for("Sales 2024.csv") == "sales_2024"
    assert table_name_for("2024.xlsx") == "t_2024"
    assert table_name_for("select.csv") == "t_select"
    assert table_name_for("données.csv") == "donn_es"
    assert table_name_for("...csv") == "data"


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=30))
def test_table_name_is_always_a_bare_identifier(name):
    t = table_name_for(name + ".csv")
    assert re.fullmatch(r"[a-z_][a-z0-9_]*", t) and quote_ident(t) == t


@pytest.fixture(scope="module")
def duck():
    import duckdb

    con = duckdb.connect(":memory:")
    yield con
    con.close()


@settings(max_examples=150)
@given(
    name=st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=20
    )
)
def test_quote_ident_round_trips_through_duckdb(duck, name):
    assume(name.strip() == name)
    cur = duck.execute(f"SELECT 1 AS {quote_ident(name)}")
    assert cur.description[0][0] == name
