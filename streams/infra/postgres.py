"""A throwaway local PostgreSQL server: initdb into a folder, start on a free loopback port.

``initdb`` refuses to run as root, so as root the server tools run as the ``postgres``
user (``runuser``), in a folder of the system temp dir handed to that user (the folder
asked for may sit below directories that user cannot enter), removed at ``stop``.
The server keeps PostgreSQL's default durability settings (fsync, synchronous_commit on).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from streams.errors import PostgresQueryError, PostgresStartError
from streams.infra.ports import free_port


def _bindir() -> Path:
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and (Path(out.stdout.strip()) / "initdb").exists():
            return Path(out.stdout.strip())
    found = [shutil.which("initdb"), *sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))]
    initdb = next((f for f in found if f), None)  # Debian keeps them off PATH
    if initdb is None:
        raise PostgresStartError(
            "PostgreSQL's server tools (initdb, pg_ctl) are not installed; "
            "on Debian: apt-get install postgresql"
        )
    return Path(initdb).parent


class LocalPostgres:
    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.as_root = os.geteuid() == 0
        self.folder = Path(tempfile.mkdtemp(prefix="dcb-postgres-")) if self.as_root else folder
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self.port = port or free_port()
        self.bindir = _bindir()
        self.user = "postgres"

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PostgresStartError(
                f"{tool} failed ({done.returncode}): {done.stderr.strip()[-2000:]}", tool=tool
            )

    def start(self) -> LocalPostgres:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.as_root:
            try:
                owner = pwd.getpwnam(self.user)
            except KeyError as exc:
                raise PostgresStartError(
                    "running as root needs the 'postgres' user (apt-get install postgresql)"
                ) from exc
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8")
        options = f"-h 127.0.0.1 -p {self.port} -k {self.folder}"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        return self

    def query(self, sql: str) -> list[list[str]]:
        """Rows of ``sql`` as text, through ``psql`` (no Python driver needed)."""
        done = subprocess.run(
            [
                *(str(self.bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port)),
                *("-U", self.user, "-d", "postgres", "-AtX", "-F", "\t"),
                *("-v", "ON_ERROR_STOP=1", "-c", sql),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise PostgresQueryError(f"psql failed: {done.stderr.strip()[-2000:]}", sql=sql)
        return [line.split("\t") for line in done.stdout.splitlines()]

    def pid(self) -> int | None:
        """The postmaster's pid (its backends are its children)."""
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        if self.pid() is not None:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        if self.as_root:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
