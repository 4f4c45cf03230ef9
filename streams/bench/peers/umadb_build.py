"""Building the UmaDB server with cargo, once, into a cache outside the repo.

``cargo install umadb`` compiles its gRPC code with ``protoc``, which Maven Central
serves as a native executable (``com.google.protobuf:protoc:<v>:exe:linux-x86_64``).
A marker-free check is enough here: cargo installs the binary last, atomically.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

from streams.errors import PeerUnavailableError

UMADB_VERSION = "0.7.8"
PROTOC_VERSION = "4.33.2"


def built_program(cache_dir: Path) -> Path:
    return cache_dir / f"umadb-{UMADB_VERSION}" / "bin" / "umadb"


def _cargo() -> str | None:
    beside = Path.home() / ".cargo" / "bin" / "cargo"
    return shutil.which("cargo") or (str(beside) if beside.exists() else None)


def fetch_protoc(cache_dir: Path) -> Path:
    """protoc from Maven Central, executable, in the cache."""
    folder = cache_dir / f"protoc-{PROTOC_VERSION}"
    exe = folder / f"protoc-{PROTOC_VERSION}-linux-x86_64.exe"
    if exe.exists():
        return exe
    mvn = shutil.which("mvn")
    if mvn is None or platform.machine() != "x86_64":
        raise PeerUnavailableError(
            "protoc comes from Maven Central here, for linux-x86_64: mvn is needed", peer="umadb"
        )
    coordinates = f"com.google.protobuf:protoc:{PROTOC_VERSION}:exe:linux-x86_64"
    done = subprocess.run(
        [
            mvn,
            "-B",
            "-q",
            "dependency:copy",
            f"-Dartifact={coordinates}",
            f"-DoutputDirectory={folder}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not exe.exists():
        raise PeerUnavailableError(
            f"Maven could not fetch {coordinates}",
            peer="umadb",
            output=(done.stdout + done.stderr)[-2000:],
        )
    exe.chmod(0o755)
    return exe


def build_with_cargo(cache_dir: Path, log: Path) -> Path:
    """``cargo install umadb`` into the cache unless built before; the server program."""
    program = built_program(cache_dir)
    if program.exists():
        return program
    cargo = _cargo()
    if cargo is None:
        raise PeerUnavailableError("cargo is not installed (rustup.rs)", peer="umadb")
    env = {**os.environ, "PROTOC": str(fetch_protoc(cache_dir))}
    root = program.parent.parent
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        done = subprocess.run(
            [cargo, "install", "umadb", f"--version={UMADB_VERSION}", "--locked", f"--root={root}"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0 or not program.exists():
        raise PeerUnavailableError(f"cargo install umadb failed; its log: {log}", peer="umadb")
    return program
