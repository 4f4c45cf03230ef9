"""UmaDB, the Rust DCB server, driven by its Python client.

The server is the ``umadb`` program built by ``cargo install umadb`` into the cache
(``umadb_build``), or, when that cannot be had or is not asked for, the one the PyPI
``umadb`` wheel ships (the same server, built by its maintainers). Each run gets a
fresh data folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streams.bench.peers.api import Condition, Event, PeerStore, PeerSystem, Query, Sequenced
from streams.bench.peers.umadb_build import UMADB_VERSION, build_with_cargo
from streams.errors import AppendConditionFailed, PeerUnavailableError
from streams.infra.ports import free_port
from streams.infra.processes import terminate

try:
    import umadb as uma
except ImportError:  # an optional extra
    uma = None  # type: ignore[assignment]


def wheel_program() -> str | None:
    """The server the PyPI wheel installs next to this Python (else any on PATH)."""
    beside = Path(sys.executable).parent / "umadb"
    return str(beside) if beside.exists() else shutil.which("umadb")


def _query(query: Query) -> Any:
    return uma.Query([uma.QueryItem(types=list(i.types), tags=list(i.tags)) for i in query.items])


class UmaDbStore(PeerStore):
    def __init__(self, url: str) -> None:
        self.client = uma.Client(url)

    def read(self, query: Query, after: int | None = None) -> list[Sequenced]:
        start = None if after is None else after + 1
        return [
            Sequenced(e.position, Event(e.event.event_type, tuple(e.event.tags), e.event.data))
            for e in self.client.read(_query(query) if query.items else None, start=start)
        ]

    def append(self, events: Sequence[Event], condition: Condition | None = None) -> int:
        guard = (
            None
            if condition is None
            else uma.AppendCondition(_query(condition.query), after=condition.after)
        )
        try:
            position: int = self.client.append(
                [uma.Event(e.type, e.data, tags=list(e.tags)) for e in events], guard
            )
        except uma.IntegrityError as exc:
            raise AppendConditionFailed("the append condition failed") from exc
        return position

    def close(self) -> None:
        self.client.close()


class UmaDb(PeerSystem):
    name = "umadb"
    durability = "fsync before acknowledging (its documentation), appends batched per flush"

    def __init__(self, folder: Path, build_cache: Path | None = None) -> None:
        """``build_cache``: build the server with cargo there (once) and run that build."""
        self.folder = folder
        self.build_cache = build_cache
        self.detail = ""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def _program(self) -> str:
        if self.build_cache is not None:
            try:
                built = build_with_cargo(self.build_cache, self.folder / "cargo-install.log")
            except PeerUnavailableError as exc:
                fallback = f"the PyPI wheel's server (no cargo build: {exc.message})"
            else:
                self.detail = f"server: cargo install umadb {UMADB_VERSION} ({built})"
                return str(built)
        else:
            fallback = "the PyPI wheel's server"
        program = wheel_program()
        if uma is None or program is None:
            raise PeerUnavailableError(
                "UmaDB is not installed: pip install -e '.[bench]'", peer=self.name
            )
        self.detail = f"server: {fallback}"
        return program

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        program = self._program()
        with (self.folder / "umadb.log").open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    program,
                    "--listen",
                    f"127.0.0.1:{self.port}",
                    "--db-path",
                    str(self.folder / "uma.db"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                uma.Client(self.url).head()
                return
            except Exception as exc:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise PeerUnavailableError(
                        f"the UmaDB server did not answer: {exc}", peer=self.name
                    ) from exc
                time.sleep(0.2)

    def store(self) -> PeerStore:
        return UmaDbStore(self.url)

    def server_pids(self) -> list[int]:
        return [] if self._proc is None else [self._proc.pid]

    def stop(self) -> None:
        terminate(self._proc, 10)
