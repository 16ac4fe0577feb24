"""A real PostgreSQL server for the team-store tests: Debian's postgresql-15 (installed by
scripts/setup.sh), started in a temporary directory on a unix socket, as the postgres
user when the tests run as root (the server refuses root)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

BIN = Path(os.environ.get("NBMEMORY_PG_BIN", "/usr/lib/postgresql/15/bin"))


class Server:
    def __init__(self) -> None:
        if not (BIN / "initdb").exists():
            raise RuntimeError(
                f"PostgreSQL is not installed ({BIN / 'initdb'} is missing): the team store "
                "tests need it. Install it with: apt-get install -y postgresql-15 "
                "(scripts/setup.sh does this as root).")
        self.base = Path(tempfile.mkdtemp(prefix="nbmemory-pg-"))
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.base, "postgres")
        self.base.chmod(0o755)
        self.data, self.port = self.base / "data", 5432
        self._names = itertools.count(1)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        command = [str(BIN / tool), *args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-w", "-o",
                  f"-k {self.base} -p {self.port} -c listen_addresses='' -c fsync=off", "start")

    def stop(self, mode: str = "fast") -> None:
        """``mode="immediate"`` is the crash-like stop (no checkpoint)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str = "postgres", **query: str) -> str:
        extra = "".join(f"&{k}={v}" for k, v in query.items())
        return f"postgresql://postgres@/{database}?host={self.base}&port={self.port}{extra}"

    def new_database(self) -> str:
        """A fresh, empty database's name."""
        import psycopg

        name = f"team{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return name

    def close(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
