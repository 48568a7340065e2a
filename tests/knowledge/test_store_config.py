"""The ``store`` section of the lab config: SQLite by default, PostgreSQL by URL, the
RAG_LAB_STORE_DSN override, and errors that name the key and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.knowledge.store_config import STORE_DSN_ENV, StoreConfig

URL = "postgresql://rag@127.0.0.1:5432/rag_lab"


@pytest.mark.parametrize(
    ("cfg", "env", "expected"),
    [
        (None, {}, StoreConfig("sqlite")),
        ({}, {}, StoreConfig("sqlite")),
        ({"type": "sqlite"}, {}, StoreConfig("sqlite")),
        ({"type": "postgres", "dsn": URL}, {}, StoreConfig("postgres", URL)),
        ({"dsn": URL}, {}, StoreConfig("postgres", URL)),
        ({"type": "postgres"}, {STORE_DSN_ENV: URL}, StoreConfig("postgres", URL)),
        (None, {STORE_DSN_ENV: URL}, StoreConfig("postgres", URL)),
        ({"type": "postgres", "dsn": URL}, {STORE_DSN_ENV: "sqlite"}, StoreConfig("sqlite")),
        ({"type": "postgres", "dsn": "postgres://a@b/c"}, {STORE_DSN_ENV: URL}, StoreConfig("postgres", URL)),
    ],
)
def test_store_section_and_environment(cfg, env, expected):
    assert StoreConfig.from_config(cfg, "lab.yaml", environ=env) == expected


@pytest.mark.parametrize(
    ("cfg", "env", "message"),
    [
        ("postgres", {}, r"lab.yaml: store: expected a mapping \{type: sqlite\|postgres, dsn: URL\}, got 'postgres'"),
        ({"type": "mysql"}, {}, r"lab.yaml: store.type: expected one of sqlite, postgres, got 'mysql'"),
        ({"type": "postgres"}, {}, r"lab.yaml: store.dsn: required for type postgres \(or set \$RAG_LAB_STORE_DSN\)"),
        (
            {"type": "postgres", "dsn": "mysql://u:pw@h/db"},
            {},
            r"lab.yaml: store.dsn: expected a URL starting with postgresql:// or postgres://, got 'mysql://u:\*\*\*@h/db'",
        ),
        ({"type": "postgres", "dsn": 5432}, {}, r"lab.yaml: store.dsn: expected a postgresql:// URL string, got 5432"),
        ({"type": "sqlite", "dsn": URL}, {}, r"lab.yaml: store.dsn: given for type sqlite"),
        (
            {"type": "postgres", "dsn": URL, "pool": 4},
            {},
            r"lab.yaml: store: unknown key\(s\) pool; allowed: dsn, outage_s, type",
        ),
        (
            None,
            {STORE_DSN_ENV: "postgresql-ish://u:secret@h/db"},
            r"\$RAG_LAB_STORE_DSN: expected a URL starting with postgresql:// or postgres://, or 'sqlite'",
        ),
    ],
)
def test_bad_store_sections_name_the_key_and_the_value(cfg, env, message):
    with pytest.raises(ValueError, match=message) as err:
        StoreConfig.from_config(cfg, "lab.yaml", environ=env)
    assert "secret" not in str(err.value)


def test_locations_and_description(tmp_path):
    assert StoreConfig("sqlite").knowledge_location(tmp_path) == Path(tmp_path) / "store.sqlite"
    assert StoreConfig("sqlite").sessions_location(tmp_path) == Path(tmp_path) / "sessions.sqlite"
    pg = StoreConfig("postgres", "postgresql://u:pw@h/db")
    assert pg.knowledge_location(tmp_path) == pg.sessions_location(tmp_path) == "postgresql://u:pw@h/db"
    assert pg.describe() == "postgres postgresql://u:***@h/db"


def test_the_lab_reports_a_bad_store_section(tmp_path, monkeypatch):
    from rag_lab.lab.lab import Lab, LabConfigError

    monkeypatch.delenv(STORE_DSN_ENV, raising=False)
    with pytest.raises(LabConfigError, match=r"<dict>: store.type: expected one of sqlite, postgres, got 'oracle'"):
        Lab({"store": {"type": "oracle"}}, workspace=tmp_path)
