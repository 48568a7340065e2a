"""A real PostgreSQL server on loopback for the tests (and benchmarks) that need one.

:class:`PostgresServer` runs Debian's ``initdb`` and ``pg_ctl`` (``/usr/lib/postgresql/<v>/bin``)
in a temporary folder (removed by :meth:`PostgresServer.stop`): ``listen_addresses = 127.0.0.1`` on a free port, the unix socket in that
folder, ``trust`` authentication for loopback only, fsync off (a test cluster). PostgreSQL refuses
to run as root, so under root the folder is handed to the ``postgres`` system user (Debian's
package creates it) and the binaries run through ``runuser -u postgres --``; any other user runs
them directly. :meth:`PostgresServer.new_database` gives each test its own database, so tests share
one server (its start is the only seconds they pay); :meth:`PostgresServer.new_schema` is
cheaper still (a schema of one shared database). :meth:`PostgresServer.restart` stops the server,
keeps it down a while (connections refused) and starts it again, for the outage tests
(:meth:`PostgresServer.pause` and :meth:`PostgresServer.resume` do each half).

:func:`need_postgres` skips a test when PostgreSQL or psycopg is missing, and fails it instead when
``RAG_LAB_REQUIRE_EXTRAS=1`` or ``CI`` is set (``make test`` and CI install both).
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PG_BIN", "PostgresServer", "need_postgres"]


def _find_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: float(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


#: the folder holding ``initdb`` and ``pg_ctl`` (the newest installed version), or None
PG_BIN = _find_bin()


def need_postgres() -> None:
    """Skip (or, with ``RAG_LAB_REQUIRE_EXTRAS`` / ``CI``, fail) when PostgreSQL cannot run here."""
    import pytest

    required = bool(os.environ.get("RAG_LAB_REQUIRE_EXTRAS") or os.environ.get("CI"))
    missing = ""
    if PG_BIN is None:
        missing = "PostgreSQL is not installed (apt-get install -y postgresql)"
    else:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            missing = "psycopg is not installed (pip install -e '.[postgres]')"
    if missing:
        if required:
            pytest.fail(f"{missing}; RAG_LAB_REQUIRE_EXTRAS / CI require the PostgreSQL tests to run")
        pytest.skip(f"{missing}; PostgreSQL tests skipped")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in ``folder`` (see the module docstring)."""

    def __init__(self) -> None:
        # its own folder right under the temporary root: under root, the ``postgres`` user must
        # reach it, and pytest's folders (mode 0700, owned by root) are closed to it
        self.folder = Path(tempfile.mkdtemp(prefix="rag_lab_pg_"))
        self.data = self.folder / "data"
        self.port = _free_port()
        self._names = itertools.count(1)
        self._has_db = False
        self._as_postgres = os.geteuid() == 0
        #: the database superuser initdb creates: the user running the server
        self.user = "postgres" if self._as_postgres else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, *args: str, timeout: float = 60.0) -> None:
        assert PG_BIN is not None
        cmd = [str(PG_BIN / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
            )

    def start(self) -> PostgresServer:
        if self._as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
            os.chmod(self.folder, 0o700)
        # C locale: text sorts by code point, as SQLite's BINARY collation does
        self._run("initdb", "-D", str(self.data), "-U", self.user, "-A", "trust", "--locale=C", "-E", "UTF8")
        settings = (
            f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{self.folder}'\n"
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 200\n"
            "shared_buffers = 32MB\n"
        )
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as f:
            f.write(settings)
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 trust\n", encoding="utf-8"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60", "start")
        atexit.register(self.stop)  # an interrupted session does not leave a server behind
        self._wait()
        return self

    def _wait(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def dsn(self, database: str) -> str:
        """The URL of ``database`` over TCP on loopback."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "t") -> str:
        """Create an empty database; its URL."""
        import psycopg

        name = f"{prefix}{next(self._names)}_{os.getpid()}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def new_schema(self, prefix: str = "s") -> str:
        """Create an empty schema in the database ``rag_lab``; a URL whose connections use it
        (``search_path``): a fresh store in a millisecond, where a database takes a tenth of a second."""
        import psycopg

        if not self._has_db:
            with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
                conn.execute('CREATE DATABASE "rag_lab"')
            self._has_db = True
        name = f"{prefix}{next(self._names)}"
        with psycopg.connect(self.dsn("rag_lab"), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return self.dsn("rag_lab") + f"?options=-c%20search_path%3D{name}"

    def pause(self) -> None:
        """Stop the server (``-m fast``: its sessions are told and dropped); connections are
        refused until :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the paused server again and wait until it answers."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60", "start")
        self._wait()

    def restart(self, down_s: float = 1.0) -> None:
        """:meth:`pause`, ``down_s`` seconds down, :meth:`resume` (a restart as ``pg_ctl restart``
        does it, with a longer gap)."""
        self.pause()
        time.sleep(down_s)
        self.resume()

    def stop(self) -> None:
        if not self.folder.exists():
            return
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=30.0)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
