"""The lexical read-only SQL guard (safety layer 1 of :mod:`rag_lab.tools.data_analysis`)."""

from __future__ import annotations

from dataclasses import dataclass

from rag_lab.tools.data_analysis.errors import SQLGuardError, _first_line

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
    {
        "glob",
        "sniff_csv",
        "query",
        "query_table",
        "getenv",
        "load_extension",
        "http_get",
        "http_post",
        "sql_auto_complete",
        "which_secret",
        "current_setting",
    }
)
#: the table functions a query may call in a FROM / JOIN position (they only generate rows);
#: every other one (file readers, catalog and settings listings, ...) is refused there
ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
_FORBIDDEN_FUNCTION_PREFIXES = (
    "read_",
    "duckdb_",
    "pragma_",
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


def _name(t: _Tok) -> str:
    """A word, or a double-quoted identifier unquoted (DuckDB resolves ``"read_csv"(…)`` as the
    function ``read_csv``: quoting must not hide a name from the checks)."""
    if t.kind == "ident":
        return t.text[1:-1].replace('""', '"')
    return t.text


def _path_like(name: str) -> bool:
    """A quoted table name DuckDB would read as a file (replacement scan): a path or a file name."""
    return "/" in name or "\\" in name or "." in name or ":" in name


def _forbidden_function(name: str) -> bool:
    low = name.lower()
    return (
        low in _FORBIDDEN_FUNCTIONS
        or low.startswith(_FORBIDDEN_FUNCTION_PREFIXES)
        or low.endswith(_FORBIDDEN_FUNCTION_SUFFIXES)
    )


# words that start a query inside parentheses (a subquery, not an expression)
_QUERY_WORDS = frozenset(
    {"SELECT", "WITH", "FROM", "VALUES", "TABLE", "PIVOT", "UNPIVOT", "SUMMARIZE", "DESCRIBE", "SHOW"}
)
# statements that take a table reference right after their first word (as a subquery)
_TABLE_STATEMENTS = frozenset({"PIVOT", "UNPIVOT", "SUMMARIZE", "DESCRIBE", "SHOW", "TABLE"})
# words that end a FROM clause at their level (after them a comma no longer separates tables)
_FROM_CLAUSE_ENDS = frozenset(
    {"WHERE", "GROUP", "HAVING", "QUALIFY", "WINDOW", "ORDER", "LIMIT", "OFFSET", "UNION", "INTERSECT", "EXCEPT"}
    | {"SELECT", "VALUES", "RETURNING"}
)


@dataclass(slots=True)
class _Level:
    """One parenthesis level of the query: a query (``(SELECT …)``, ``(FROM …)``, a
    parenthesised table reference) or an expression (function arguments, ``IN (…)``)."""

    query: bool
    in_from: bool = False
    first: bool = True


def _punct(t: _Tok | None, text: str) -> bool:
    return t is not None and t.kind == "punct" and t.text == text


def _check_table_ref(body: list[_Tok], i: int) -> int:
    """Check the table reference starting at ``body[i]`` (a name, ``schema.name`` or a table
    function call); the index of its last name."""
    j = i
    while _punct(body[j + 1] if j + 1 < len(body) else None, ".") and j + 2 < len(body):
        j += 2
        if body[j].kind == "string":
            raise SQLGuardError(
                f"table reference {body[j].text} at character {body[j].pos}: reading a file by name is not allowed"
            )
    last = body[j]
    if last.kind not in ("word", "ident"):
        return j
    nxt = body[j + 1] if j + 1 < len(body) else None
    if _punct(nxt, "("):
        name = _name(last)
        if name.lower() not in ALLOWED_TABLE_FUNCTIONS:
            allowed = ", ".join(sorted(ALLOWED_TABLE_FUNCTIONS))
            raise SQLGuardError(f"table function {name!r} at character {last.pos} is not allowed (allowed: {allowed})")
    elif last.kind == "ident" and _path_like(_name(last)):
        raise SQLGuardError(
            f"table reference {last.text} at character {last.pos}: reading a file by name is not allowed"
        )
    return j


def _check_table_refs(body: list[_Tok]) -> None:
    """Every table reference (after ``FROM`` / ``JOIN``, after a comma in a FROM clause, inside a
    parenthesised one, after ``LATERAL``, after ``PIVOT`` / ``SUMMARIZE`` / … starting a subquery)
    is a table name or an allowed table function, never a quoted string (DuckDB reads the file it
    names) nor another table function."""
    levels = [_Level(query=True)]
    expect = False  # the next token is a table reference
    i = 0
    while i < len(body):
        t, lvl = body[i], levels[-1]
        up = t.text.upper() if t.kind == "word" else ""
        first, lvl.first = lvl.first, False
        if _punct(t, "("):
            nxt = body[i + 1] if i + 1 < len(body) else None
            is_query = expect or (nxt is not None and nxt.kind == "word" and nxt.text.upper() in _QUERY_WORDS)
            levels.append(_Level(query=is_query, in_from=expect))
        elif _punct(t, ")"):
            if len(levels) > 1:
                levels.pop()
            expect = False
        elif expect and up == "LATERAL":
            pass
        elif up in ("FROM", "JOIN") and lvl.query:
            lvl.in_from = expect = True
        elif up in _TABLE_STATEMENTS and first and lvl.query:
            expect = True
        elif expect and up in _QUERY_WORDS:
            lvl.in_from = expect = False
        elif expect:
            if t.kind == "string":
                raise SQLGuardError(
                    f"table reference {t.text} at character {t.pos}: reading a file by name is not allowed"
                )
            if t.kind in ("word", "ident"):
                i = _check_table_ref(body, i)
            expect = False
        elif up in _FROM_CLAUSE_ENDS:
            lvl.in_from = False
        elif _punct(t, ",") and lvl.in_from:
            expect = True
        i += 1


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
        nxt = body[idx + 1] if idx + 1 < len(body) else None
        if t.kind == "ident":
            name = _name(t)
            if nxt is not None and nxt.kind == "punct" and nxt.text == "(" and _forbidden_function(name):
                raise SQLGuardError(f"function {name!r} at character {t.pos} reads files or runs SQL; not allowed")
            continue
        if t.kind != "word":
            continue
        up = t.text.upper()
        if up in FORBIDDEN_KEYWORDS:
            raise SQLGuardError(
                f"keyword {t.text!r} at character {t.pos} is not allowed in a read-only query "
                f"(a column with that name must be double-quoted)"
            )
        if nxt is not None and nxt.kind == "punct" and nxt.text == "(" and _forbidden_function(t.text):
            raise SQLGuardError(f"function {t.text!r} at character {t.pos} reads files or runs SQL; not allowed")
        if up in ("FROM", "JOIN") and nxt is not None and nxt.kind == "string":
            raise SQLGuardError(f"{t.text} {nxt.text} at character {t.pos}: reading a file by name is not allowed")
        if up in ("FROM", "JOIN") and nxt is not None and nxt.kind == "ident" and _path_like(_name(nxt)):
            after = body[idx + 2] if idx + 2 < len(body) else None
            if not (after is not None and after.kind == "punct" and after.text == "."):  # not "schema".table
                raise SQLGuardError(f"{t.text} {nxt.text} at character {t.pos}: reading a file by name is not allowed")
    _check_table_refs(body)
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
