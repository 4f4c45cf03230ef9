"""Fetching Java artifacts from Maven Central into a cache, once.

A throw-away ``pom``-packaged project names the artifacts; Maven's
``dependency:copy-dependencies`` resolves their runtime closure into ``libs/``.
A marker file makes a half-finished fetch (crash, Ctrl-C) count as absent.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from streams.errors import KafkaFetchError

_MARKER = ".complete"


@dataclass(frozen=True)
class MavenArtifact:
    group_id: str
    artifact_id: str
    version: str

    def dependency_xml(self) -> str:
        return (
            "<dependency>"
            f"<groupId>{self.group_id}</groupId>"
            f"<artifactId>{self.artifact_id}</artifactId>"
            f"<version>{self.version}</version>"
            "</dependency>"
        )


def _pom(artifacts: Sequence[MavenArtifact]) -> str:
    deps = "\n    ".join(a.dependency_xml() for a in artifacts)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dcb-streams.cache</groupId>
  <artifactId>runtime-closure</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    {deps}
  </dependencies>
</project>
"""


def is_fetched(target: Path) -> bool:
    return (target / _MARKER).exists()


def fetch_runtime_closure(artifacts: Sequence[MavenArtifact], target: Path) -> Path:
    """Copy the runtime jars of ``artifacts`` into ``target/libs``; no-op when done before."""
    libs = target / "libs"
    if is_fetched(target):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaFetchError("Maven (mvn) is not on PATH; it is needed to fetch Kafka once")
    if libs.exists():
        shutil.rmtree(libs)
    target.mkdir(parents=True, exist_ok=True)
    (target / "pom.xml").write_text(_pom(artifacts))
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(target / "pom.xml"),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={libs}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise KafkaFetchError(
            "Maven could not fetch the broker's jars",
            artifacts=[f"{a.group_id}:{a.artifact_id}:{a.version}" for a in artifacts],
            output=(proc.stdout + proc.stderr)[-4000:],
        )
    (target / _MARKER).write_text("ok\n")
    return libs
