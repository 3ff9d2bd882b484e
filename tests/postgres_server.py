"""A real PostgreSQL server on loopback for the JDBC catalog's tests: ``initdb`` and ``pg_ctl`` from
the Debian package (``/usr/lib/postgresql/<version>/bin``), run as the ``postgres`` user when this
process is root (PostgreSQL refuses to run as root), in a temp directory of its own.

Connections over TCP need a password (scram-sha-256), so a wrong password is refused as on a real
server; ``psql`` over the server's Unix socket is trusted and sets up roles and databases.

Command line: ``python -m tests.postgres_server`` starts one and prints its URI until Ctrl-C.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from typing import Optional

from tests.services import free_port

__all__ = ["PostgresServer", "postgres_bin", "REQUIRE_ENV"]

REQUIRE_ENV = "LAKELOG_REQUIRE_POSTGRES"
USER, PASSWORD = "lakelog", "s3cret-pw"


def postgres_bin() -> Optional[str]:
    """The newest ``/usr/lib/postgresql/<v>/bin`` holding ``initdb`` and ``pg_ctl`` (or the PATH's)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class PostgresServer:
    """One server: ``start()``, ``uri(database)``, ``create_database()``, ``stop()``."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.bin = postgres_bin()
        self.fsync = fsync
        self.dir = ""
        self.port = 0
        self.user, self.password = USER, PASSWORD

    @staticmethod
    def unavailable_reason() -> Optional[str]:
        if postgres_bin() is None:
            return "no PostgreSQL server binaries (apt-get install postgresql)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root without a 'postgres' user to run the server as"
        return None

    def _run(self, *cmd: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        argv = list(cmd)
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.dir)
        if check and res.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}\n{self.log_tail()}"
            )
        return res

    def log_tail(self, n: int = 3000) -> str:
        try:
            with open(os.path.join(self.dir, "log"), encoding="utf-8", errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def start(self) -> PostgresServer:
        reason = self.unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        assert self.bin is not None
        self.dir = tempfile.mkdtemp(prefix="lakelog-pg-")
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o700)
        pwfile = os.path.join(self.dir, "pw")
        with open(pwfile, "w") as f:
            f.write("unused-superuser-password\n")
        if os.geteuid() == 0:
            os.chown(pwfile, pwd.getpwnam("postgres").pw_uid, -1)
        self._run(f"{self.bin}/initdb", "-D", f"{self.dir}/data", "-U", "postgres", "--auth-local=trust",
                  "--auth-host=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8", "--no-instructions")
        settings = f"-k {self.dir} -c listen_addresses=127.0.0.1 -c max_connections=60 -c shared_buffers=32MB"
        if not self.fsync:
            settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        for _ in range(5):
            self.port = free_port()
            res = self._run(f"{self.bin}/pg_ctl", "-D", f"{self.dir}/data", "-o",
                            f"-p {self.port} {settings}", "-l", f"{self.dir}/log", "-w", "-t", "60", "start",
                            check=False)
            if res.returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"PostgreSQL did not start:\n{self.log_tail()}")
        self.psql(f"CREATE ROLE {self.user} LOGIN PASSWORD '{self.password}'")
        self.create_database("catalog")
        return self

    def psql(self, sql: str, database: str = "postgres") -> str:
        assert self.bin is not None
        return self._run(f"{self.bin}/psql", "-h", self.dir, "-p", str(self.port), "-U", "postgres", "-d",
                         database, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql).stdout

    def create_database(self, name: Optional[str] = None) -> str:
        """A new database owned by the test role; its name."""
        name = name or f"db_{uuid.uuid4().hex[:10]}"
        self.psql(f"CREATE DATABASE {name} OWNER {self.user}")
        return name

    def uri(self, database: str = "catalog") -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}"

    def options(self, database: str = "catalog", **extra: str) -> dict[str, str]:
        """Catalog options of a JDBC catalog in ``database``."""
        return {"metastore": "jdbc", "uri": self.uri(database), "jdbc.user": self.user,
                "jdbc.password": self.password, **extra}

    def stop(self) -> None:
        if not self.dir:
            return
        if self.bin and os.path.isdir(f"{self.dir}/data"):
            self._run(f"{self.bin}/pg_ctl", "-D", f"{self.dir}/data", "-m", "immediate", "-w", "stop",
                      check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = ""

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    with PostgresServer() as server:
        print(server.uri(), "user", server.user, "password", server.password, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
