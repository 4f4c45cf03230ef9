"""The embedded Kafka Connect worker: one distributed-mode node with the Debezium JDBC sink.

Like the broker it exists so a machine without Docker runs the real thing: Connect's jars
(``connect-runtime``, ``connect-json``, ``connect-transforms`` of the broker's Kafka
version) and the Debezium JDBC sink's official plugin bundle (Hibernate and the
PostgreSQL driver inside; unpacked under ``plugin.path``, never on the worker's classpath)
come from Maven Central once. The bundle's parent POM names a repository that cannot be
reached, so its fetch runs with a mirror of everything onto Maven Central.

The worker reads ``read_committed`` (``consumer.isolation.level``): a projection's rows are
written in transactions, and a sink must never land a row of one that aborted.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.errors import ConnectorFailedError, ConnectStartError, KafkaFetchError
from streams.infra.java_process import RecordedProcess, java_command, log4j2_properties
from streams.infra.maven import MavenArtifact, fetch_runtime_closure, is_fetched
from streams.settings import DcbSettings

log = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
SINK_CLASS = "io.debezium.connector.jdbc.JdbcSinkConnector"
_MARKER = ".complete"
_MIRROR = """<settings><mirrors><mirror><id>central</id><mirrorOf>*</mirrorOf>
<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>
"""
_LOG_LEVELS = {"org.reflections": "ERROR", "org.hibernate": "WARN"}


@dataclass(frozen=True)
class ConnectStatus:
    running: bool
    pid: int | None
    url: str
    log_file: Path

    def describe(self) -> str:
        if self.running:
            return f"Kafka Connect running (pid {self.pid}) at {self.url}"
        return f"no Kafka Connect running at {self.url}"


class EmbeddedConnect:
    """Fetch, start, stop and inspect the Connect worker; deploy connectors to it."""

    def __init__(self, settings: DcbSettings) -> None:
        self.settings = settings
        self.connect = settings.connect
        cache = settings.broker.cache_dir
        self.home = cache / f"connect-{settings.broker.kafka_version}"
        self.plugins = cache / f"debezium-jdbc-{self.connect.debezium_version}"
        self.data_dir = self.connect.data_dir or cache / f"connect-{self.connect.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "connect.log"

    @property
    def _config_file(self) -> Path:
        return self.data_dir / "connect-distributed.properties"

    @property
    def process(self) -> RecordedProcess:
        return RecordedProcess(self.data_dir / "connect.pid", MAIN_CLASS, self._config_file)

    # --- fetch ---------------------------------------------------------------
    def fetch(self) -> None:
        """Connect's jars and the sink plugin, once each."""
        version = self.settings.broker.kafka_version
        fetch_runtime_closure(
            [
                MavenArtifact("org.apache.kafka", "connect-runtime", version),
                MavenArtifact("org.apache.kafka", "connect-json", version),
                MavenArtifact("org.apache.kafka", "connect-transforms", version),
                MavenArtifact(
                    "org.apache.logging.log4j",
                    "log4j-slf4j-impl",
                    self.settings.broker.log4j_slf4j_version,
                ),
            ],
            self.home,
        )
        if not is_fetched(self.plugins):
            self._fetch_plugin()

    def _fetch_plugin(self) -> None:
        mvn = shutil.which("mvn")
        if mvn is None:
            raise KafkaFetchError("Maven (mvn) is not on PATH; it fetches the sink plugin once")
        shutil.rmtree(self.plugins, ignore_errors=True)
        download = self.plugins / "download"
        download.mkdir(parents=True)
        (self.plugins / "settings.xml").write_text(_MIRROR)
        artifact = f"io.debezium:debezium-connector-jdbc:{self.connect.debezium_version}"
        cmd = [
            mvn,
            "-B",
            "-q",
            "-s",
            str(self.plugins / "settings.xml"),
            "dependency:copy",
            f"-Dartifact={artifact}:tar.gz:plugin",
            f"-DoutputDirectory={download}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        bundles = list(download.glob("*.tar.gz"))
        if proc.returncode != 0 or not bundles:
            raise KafkaFetchError(
                "Maven could not fetch the Debezium JDBC sink plugin",
                artifact=artifact,
                output=(proc.stdout + proc.stderr)[-4000:],
            )
        with tarfile.open(bundles[0]) as bundle:
            bundle.extractall(self.plugins / "plugins", filter="data")
        shutil.rmtree(download)
        (self.plugins / _MARKER).write_text("ok\n")

    # --- start / stop ----------------------------------------------------------
    def _properties(self) -> str:
        c, group = self.connect, self.connect.group_id
        rf = self.settings.topics.replication_factor
        return "\n".join(
            [
                f"bootstrap.servers={self.settings.resolved_bootstrap_servers}",
                f"group.id={group}",
                f"config.storage.topic={group}-configs",
                f"offset.storage.topic={group}-offsets",
                f"status.storage.topic={group}-status",
                f"config.storage.replication.factor={rf}",
                f"offset.storage.replication.factor={rf}",
                f"status.storage.replication.factor={rf}",
                "key.converter=org.apache.kafka.connect.json.JsonConverter",
                "value.converter=org.apache.kafka.connect.json.JsonConverter",
                "key.converter.schemas.enable=true",
                "value.converter.schemas.enable=true",
                "consumer.isolation.level=read_committed",
                "offset.flush.interval.ms=1000",
                f"plugin.path={self.plugins / 'plugins'}",
                f"listeners=http://{c.host}:{c.port}",
                f"rest.advertised.host.name={c.host}",
                f"rest.advertised.port={c.port}",
                "",
            ]
        )

    def status(self) -> ConnectStatus:
        pid = self.process.pid()
        return ConnectStatus(pid is not None, pid, self.connect.url(), self.log_file)

    def start(self) -> ConnectStatus:
        """Start the worker and wait until its REST API lists the sink plugin."""
        if self.status().running:
            return self.status()
        if self.settings.security.protocol != "PLAINTEXT":
            raise ConnectStartError(
                "dcb connect does not log Kafka Connect in to a secure broker yet "
                f"(DCB_SECURITY__PROTOCOL={self.settings.security.protocol}); run Connect with "
                "the tenant's SASL settings yourself, or against a plaintext broker",
                protocol=self.settings.security.protocol,
            )
        self.fetch()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._config_file.write_text(self._properties())
        log4j = self.data_dir / "log4j2.properties"
        log4j.write_text(log4j2_properties(self.log_file, _LOG_LEVELS))
        command = java_command(
            f"{self.home / 'libs'}/*", self.connect.heap, log4j, MAIN_CLASS, str(self._config_file)
        )
        with (self.data_dir / "stdout.log").open("ab") as out:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.process.record(proc.pid)
        deadline = time.monotonic() + self.connect.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ConnectStartError(
                    f"Kafka Connect exited with code {proc.returncode}; see {self.log_file}",
                    log_file=str(self.log_file),
                )
            try:
                plugins = self._call("GET", "/connector-plugins")
                if any(p.get("class") == SINK_CLASS for p in plugins):
                    log.info("Kafka Connect pid %s ready at %s", proc.pid, self.connect.url())
                    return self.status()
            except (OSError, ConnectorFailedError):
                pass
            time.sleep(0.5)
        self.stop()
        raise ConnectStartError(
            f"Kafka Connect did not list the JDBC sink within {self.connect.start_timeout_s:.0f}"
            f" s; see {self.log_file}",
            log_file=str(self.log_file),
        )

    def stop(self) -> bool:
        return self.process.stop()

    def kill(self) -> None:
        self.process.kill()

    # --- REST ------------------------------------------------------------------
    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.connect.url() + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:2000]
            raise ConnectorFailedError(
                f"Kafka Connect answered {method} {path} with {exc.code}: {detail}",
                status=exc.code,
            ) from exc
        return json.loads(text) if text else None

    def deploy(self, name: str, config: dict[str, str], timeout_s: float = 120) -> dict[str, Any]:
        """Create or update connector ``name`` and wait until it and its tasks run."""
        self._call("PUT", f"/connectors/{name}/config", config)
        deadline = time.monotonic() + timeout_s
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                state = self._call("GET", f"/connectors/{name}/status")
            except ConnectorFailedError:
                time.sleep(0.5)
                continue
            states = [state["connector"]["state"], *(t["state"] for t in state["tasks"])]
            if "FAILED" in states:
                traces = [t.get("trace", "") for t in state["tasks"]] + [
                    state["connector"].get("trace", "")
                ]
                raise ConnectorFailedError(
                    f"connector {name} failed", trace="\n".join(t for t in traces if t)[-4000:]
                )
            if state["tasks"] and all(s == "RUNNING" for s in states):
                return state
            time.sleep(0.5)
        raise ConnectorFailedError(f"connector {name} not RUNNING in {timeout_s:.0f} s: {state}")

    def remove(self, name: str) -> None:
        """Delete connector ``name`` (its offsets stay in Connect's offsets topic)."""
        self._call("DELETE", f"/connectors/{name}")

    def connectors(self) -> list[str]:
        return list(self._call("GET", "/connectors"))
