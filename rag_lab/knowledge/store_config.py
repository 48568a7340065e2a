"""Where a lab keeps its state: the ``store`` section of the lab config.

``store`` absent, or ``{type: sqlite}``: the embedded default, files in the workspace
(``store.sqlite`` for KBs, documents and chunks, ``sessions.sqlite`` for sessions and messages).

``{type: postgres, dsn: "postgresql://user@host:5432/rag_lab"}``: both in one PostgreSQL database,
which several processes (the replicas of a team server, an ingestion job) share. The environment
variable :data:`STORE_DSN_ENV` (``RAG_LAB_STORE_DSN``) overrides the section: set to a
``postgresql://`` URL it selects PostgreSQL with that URL (keeping a password out of the YAML);
set to ``sqlite`` it selects the embedded files. The workspace folder still holds what is
derived per process (index files, the vector cache, locks), the knowledge graph and the
long-term memory, which stay SQLite.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_lab.knowledge.sqldb import PG_SCHEMES, is_postgres, outage_window, redact

__all__ = ["STORE_DSN_ENV", "STORE_TYPES", "StoreConfig"]

STORE_DSN_ENV = "RAG_LAB_STORE_DSN"
STORE_TYPES = ("sqlite", "postgres")
_KEYS = frozenset({"type", "dsn", "outage_s"})


@dataclass(frozen=True)
class StoreConfig:
    """``type`` (``sqlite`` / ``postgres``) and, for PostgreSQL, the ``dsn`` URL and the
    ``outage_s`` window a dropped connection waits for a restarting server (``None``: the
    environment's ``RAG_LAB_STORE_OUTAGE_S``, else 30 s; :mod:`rag_lab.knowledge.sqldb`)."""

    type: str = "sqlite"
    dsn: str = ""
    outage_s: float | None = None

    @classmethod
    def from_config(cls, cfg: object, source: str = "<dict>", environ: Mapping[str, str] | None = None) -> StoreConfig:
        """The ``store`` section ``cfg`` (``None``: absent), with :data:`STORE_DSN_ENV` applied;
        a bad key or value raises ValueError naming ``source``, the key and the value."""
        env = (os.environ if environ is None else environ).get(STORE_DSN_ENV, "").strip()
        if cfg is None:
            cfg = {}
        if not isinstance(cfg, Mapping):
            raise ValueError(
                f"{source}: store: expected a mapping {{type: sqlite|postgres, dsn: URL}}, got {cfg!r:.80}"
            )
        unknown = sorted(set(cfg) - _KEYS)
        if unknown:
            raise ValueError(
                f"{source}: store: unknown key(s) {', '.join(map(str, unknown))}; allowed: dsn, outage_s, type"
            )
        outage_s = None
        if cfg.get("outage_s") is not None:
            try:
                outage_s = outage_window(cfg["outage_s"])
            except ValueError as exc:
                raise ValueError(f"{source}: {exc}") from None
        kind = cfg.get("type", "postgres" if cfg.get("dsn") else "sqlite")
        if kind not in STORE_TYPES:
            raise ValueError(f"{source}: store.type: expected one of {', '.join(STORE_TYPES)}, got {kind!r:.80}")
        dsn = cfg.get("dsn", "")
        if not isinstance(dsn, str):
            raise ValueError(f"{source}: store.dsn: expected a postgresql:// URL string, got {dsn!r:.80}")
        if env:
            if env == "sqlite":
                return cls("sqlite")
            if not is_postgres(env):
                raise ValueError(
                    f"${STORE_DSN_ENV}: expected a URL starting with {' or '.join(PG_SCHEMES)}, "
                    f"or 'sqlite', got {redact(env)!r:.80}"
                )
            return cls("postgres", env, outage_s)
        if kind == "sqlite":
            if dsn:
                raise ValueError(f"{source}: store.dsn: given for type sqlite (its files are in the workspace)")
            return cls("sqlite")
        if not dsn:
            raise ValueError(f"{source}: store.dsn: required for type postgres (or set ${STORE_DSN_ENV})")
        if not is_postgres(dsn):
            raise ValueError(
                f"{source}: store.dsn: expected a URL starting with {' or '.join(PG_SCHEMES)}, got {redact(dsn)!r:.80}"
            )
        return cls("postgres", dsn, outage_s)

    @property
    def shared(self) -> bool:
        return self.type == "postgres"

    def knowledge_location(self, root: Path) -> Path | str:
        """What :class:`~rag_lab.knowledge.store.KnowledgeStore` opens for the workspace ``root``."""
        return self.dsn if self.shared else Path(root) / "store.sqlite"

    def sessions_location(self, root: Path) -> Path | str:
        """What :class:`~rag_lab.session.sqlite_store.SQLiteSessionStore` opens."""
        return self.dsn if self.shared else Path(root) / "sessions.sqlite"

    def describe(self) -> str:
        """One line for logs: the files, or the URL without its password."""
        return f"postgres {redact(self.dsn)}" if self.shared else "sqlite (workspace files)"
