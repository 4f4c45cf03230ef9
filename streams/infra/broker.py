"""The embedded Apache Kafka broker: one KRaft node (broker + controller) on loopback.

It exists so that every machine — a developer's, CI's — runs the tests and the
demo against a real broker without Docker. The jars come from Maven Central
once (see :mod:`streams.infra.maven`); storage, config, log and pid file live
in one data folder. ``stop`` signals exactly the process recorded in the pid
file, and only when its command line is still ours (pids get reused).
"""

from __future__ import annotations

import base64
import logging
import secrets
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from streams.errors import BrokerAlreadyRunningError, BrokerPortInUseError, BrokerStartError
from streams.infra.durable_file import write_durably
from streams.infra.java_process import RecordedProcess, java_command, log4j2_properties
from streams.infra.maven import MavenArtifact, fetch_runtime_closure, is_fetched
from streams.kafka.clients import broker_answers
from streams.kafka.connection import KafkaConnection, Mechanism
from streams.settings import BrokerSettings

log = logging.getLogger(__name__)

_MAIN_CLASS = "kafka.Kafka"
PORT_LINGER_S = 15.0
_STORAGE_TOOL = "kafka.tools.StorageTool"

_LOG_LEVELS = {"kafka": "INFO", "state.change.logger": "WARN"}

# A secure broker (``--secure``): clients authenticate with SASL/SCRAM and the KRaft
# StandardAuthorizer allows only what ACLs grant; the admin is the one super user.
SCRAM: Mechanism = "SCRAM-SHA-512"
ADMIN_USER = "admin"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    data_dir: Path
    log_file: Path
    secure: bool = False

    def describe(self) -> str:
        if self.running:
            mode = " (SASL/SCRAM, ACLs)" if self.secure else ""
            return f"broker running (pid {self.pid}) at {self.bootstrap_servers}{mode}"
        return f"no broker running for {self.data_dir}"


def new_cluster_id() -> str:
    """A random KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class EmbeddedBroker:
    """Fetch, format, start, stop and inspect the embedded broker."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.data_dir = settings.resolved_data_dir()
        self.kafka_home = settings.cache_dir / f"kafka-{settings.kafka_version}"

    # --- paths ---------------------------------------------------------------
    @property
    def pid_file(self) -> Path:
        return self.data_dir / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / "server.log"

    @property
    def _config_file(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def _storage_dir(self) -> Path:
        return self.data_dir / "storage"

    @property
    def _admin_password_file(self) -> Path:
        return self.data_dir / "admin.password"

    @property
    def _secure_marker(self) -> Path:
        return self.data_dir / "secure"

    # --- security --------------------------------------------------------------
    @property
    def secure(self) -> bool:
        """Whether this data folder was formatted with ``--secure`` (it stays so: losing the
        password file does not turn the ACLs off, it stops the broker from starting)."""
        return self._secure_marker.exists() or self._admin_password_file.exists()

    def admin_connection(self) -> KafkaConnection:
        """How the admin (the one super user) connects; no credentials on a plain broker."""
        address = self.settings.bootstrap_servers
        if not self.secure:
            return KafkaConnection(address)
        if not self._admin_password_file.exists():
            raise BrokerStartError(
                f"{self.data_dir} was formatted with --secure but its admin.password is gone; "
                "the broker will not start without it",
                data_dir=str(self.data_dir),
            )
        password = self._admin_password_file.read_text().strip()
        return KafkaConnection(address, "SASL_PLAINTEXT", SCRAM, ADMIN_USER, password)

    def _make_secure(self) -> None:
        if (self._storage_dir / "meta.properties").exists():
            raise BrokerStartError(
                f"{self.data_dir} was formatted without --secure; security is chosen when a "
                "data folder is first formatted (use another port or data folder)",
                data_dir=str(self.data_dir),
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_durably(self._admin_password_file, secrets.token_urlsafe(24).encode(), 0o600)
        write_durably(self._secure_marker, b"SASL/SCRAM and ACLs\n")

    def _security_properties(self) -> list[str]:
        s = self.settings
        if not self.secure:
            return [
                f"listeners=PLAINTEXT://{s.host}:{s.port},CONTROLLER://{s.host}:{s.controller_port}",
                f"advertised.listeners=PLAINTEXT://{s.host}:{s.port}",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "inter.broker.listener.name=PLAINTEXT",
            ]
        password = self.admin_connection().password
        # The controller listener takes PLAIN with the admin alone: KRaft controllers
        # cannot check SCRAM (its credentials live in the metadata they serve).
        return [
            f"listeners=SASL_PLAINTEXT://{s.host}:{s.port},CONTROLLER://{s.host}:{s.controller_port}",
            f"advertised.listeners=SASL_PLAINTEXT://{s.host}:{s.port}",
            "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name=SASL_PLAINTEXT",
            f"sasl.enabled.mechanisms={SCRAM}",
            f"sasl.mechanism.inter.broker.protocol={SCRAM}",
            f"listener.name.sasl_plaintext.{SCRAM.lower()}.sasl.jaas.config={_SCRAM_LOGIN} "
            f'required username="{ADMIN_USER}" password="{password}";',
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.controller.protocol=PLAIN",
            f"listener.name.controller.plain.sasl.jaas.config={_PLAIN_LOGIN} required "
            f'username="{ADMIN_USER}" password="{password}" user_{ADMIN_USER}="{password}";',
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            f"super.users=User:{ADMIN_USER}",
            "allow.everyone.if.no.acl.found=false",
        ]

    # --- fetch ---------------------------------------------------------------
    def artifacts(self) -> list[MavenArtifact]:
        s = self.settings
        return [
            MavenArtifact("org.apache.kafka", "kafka_2.13", s.kafka_version),
            MavenArtifact("org.apache.logging.log4j", "log4j-slf4j-impl", s.log4j_slf4j_version),
        ]

    def is_fetched(self) -> bool:
        return is_fetched(self.kafka_home)

    def fetch(self) -> Path:
        """Fetch Kafka's runtime jars once; later calls return the cached folder."""
        return fetch_runtime_closure(self.artifacts(), self.kafka_home)

    # --- status --------------------------------------------------------------
    @property
    def process(self) -> RecordedProcess:
        return RecordedProcess(self.pid_file, _MAIN_CLASS, self._config_file)

    def status(self) -> BrokerStatus:
        pid = self.process.pid()
        return BrokerStatus(
            running=pid is not None,
            pid=pid,
            bootstrap_servers=self.settings.bootstrap_servers,
            data_dir=self.data_dir,
            log_file=self.log_file,
            secure=self.secure,
        )

    # --- start ---------------------------------------------------------------
    def _properties(self) -> str:
        s = self.settings
        n = s.internal_topic_partitions
        return "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                *self._security_properties(),
                "controller.listener.names=CONTROLLER",
                f"controller.quorum.voters=1@{s.host}:{s.controller_port}",
                f"log.dirs={self._storage_dir}",
                "num.partitions=1",
                "auto.create.topics.enable=false",
                "offsets.topic.replication.factor=1",
                f"offsets.topic.num.partitions={n}",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                f"transaction.state.log.num.partitions={n}",
                "share.coordinator.state.topic.replication.factor=1",
                "share.coordinator.state.topic.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                # A dead worker's open transaction is aborted within a second of its
                # timeout, not ten (the readers of the partitions it wrote wait for it).
                "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
                "min.insync.replicas=1",
                f"log.retention.check.interval.ms={s.retention_check_interval_ms}",
                "",
            ]
        )

    def _java(self, main_class: str, *args: str) -> list[str]:
        return java_command(
            f"{self.kafka_home / 'libs'}/*",
            self.settings.heap,
            self.data_dir / "log4j2.properties",
            main_class,
            *args,
        )

    def _write_config(self) -> None:
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        # A secure broker's config holds the admin's password.
        write_durably(self._config_file, self._properties().encode(), 0o600)
        log4j2 = log4j2_properties(self.log_file, _LOG_LEVELS)
        (self.data_dir / "log4j2.properties").write_text(log4j2)

    def format_storage(self, cluster_id: str | None = None) -> str:
        """Write the config and format the storage once; return the folder's cluster id.

        A no-op on a formatted folder, so a restart keeps its data and cluster id.
        """
        self._write_config()
        meta = self._storage_dir / "meta.properties"
        if not meta.exists():
            cluster_id = cluster_id or new_cluster_id()
            # "--cluster-id=ID", not "-t ID": an id may start with "-", which the
            # tool's parser would otherwise take for an option (1 random id in 64).
            cmd = self._java(
                _STORAGE_TOOL, "format", f"--cluster-id={cluster_id}", "-c", str(self._config_file)
            )
            if self.secure:  # the admin's SCRAM credential, before anyone can connect
                password = self.admin_connection().password
                cmd += ["--add-scram", f"{SCRAM}=[name={ADMIN_USER},password={password}]"]
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                output = (proc.stdout + proc.stderr).strip()
                last = output.splitlines()[-1] if output else "no output"
                raise BrokerStartError(
                    f"formatting the broker storage failed: {last}", output=output[-4000:]
                )
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.removeprefix("cluster.id=")
        raise BrokerStartError(f"{meta} names no cluster.id", meta_file=str(meta))

    def _port_taken(self, port: int) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.settings.host, port))
            except OSError:
                return True
        return False

    def _wait_for_port(self, port: int, linger_s: float = PORT_LINGER_S) -> None:
        """Raise :class:`BrokerPortInUseError` when ``port`` stays taken. A broker killed
        a moment ago can hold it a while longer: connections its clients have not closed
        yet keep the port until they do."""
        deadline = time.monotonic() + linger_s
        while self._port_taken(port):
            if time.monotonic() > deadline:
                raise BrokerPortInUseError(
                    f"port {self.settings.host}:{port} is already in use by another process",
                    port=port,
                )
            time.sleep(0.2)

    def start(self, secure: bool = False) -> BrokerStatus:
        """Start the broker and wait until it answers metadata requests.

        ``secure`` formats a new data folder for SASL/SCRAM and ACLs; a folder formatted
        so stays secure. Raises :class:`BrokerAlreadyRunningError` when the broker
        recorded in this data folder is still alive, rather than starting a second one.
        """
        current = self.status()
        if current.running:
            raise BrokerAlreadyRunningError(
                f"a broker is already running (pid {current.pid}) at {current.bootstrap_servers}",
                pid=current.pid,
                bootstrap_servers=current.bootstrap_servers,
            )
        for port in (self.settings.port, self.settings.controller_port):
            self._wait_for_port(port)
        if secure and not self.secure:
            self._make_secure()
        self.fetch()
        self.format_storage()
        with (self.data_dir / "logs" / "stdout.log").open("ab") as out:
            proc = subprocess.Popen(
                self._java(_MAIN_CLASS, str(self._config_file)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.process.record(proc.pid)
        self._wait_ready(proc)
        log.info("broker pid %s ready at %s", proc.pid, self.settings.bootstrap_servers)
        return self.status()

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.pid_file.unlink(missing_ok=True)
                raise BrokerStartError(
                    f"the broker exited with code {proc.returncode}; see {self.log_file}",
                    log_file=str(self.log_file),
                )
            if broker_answers(self.admin_connection(), timeout_s=1.0):
                return
            time.sleep(0.2)
        self.stop()
        raise BrokerStartError(
            f"the broker did not answer within {self.settings.start_timeout_s:.0f}s; "
            f"see {self.log_file}",
            log_file=str(self.log_file),
        )

    # --- stop ----------------------------------------------------------------
    def stop(self, timeout_s: float = 30.0) -> bool:
        """Stop the recorded broker (SIGTERM, then SIGKILL); False when none was running."""
        return self.process.stop(timeout_s)

    def kill(self) -> None:
        """SIGKILL the broker (crash tests), leaving its storage as a crash would."""
        self.process.kill()
