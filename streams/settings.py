"""Configuration: ``DCB_*`` environment variables over a TOML config file over defaults.

The config file is ``dcb.toml`` in the working directory, or the path in
``DCB_CONFIG_FILE``. Nested groups use ``__`` in env vars, e.g.
``DCB_BROKER__PORT=19092``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from streams.kafka.connection import KafkaConnection, Mechanism, Protocol

# A killed worker's partitions move to the others after this.
SESSION_TIMEOUT_S = 10.0
CONFIG_FILE_ENV = "DCB_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "dcb.toml"


def default_cache_dir() -> Path:
    """Where fetched Kafka jars and broker data live, outside any checkout."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dcb-streams"


class BrokerSettings(BaseModel):
    """The embedded single-node KRaft broker started by ``dcb broker start``."""

    kafka_version: str = Field(
        "4.1.2", description="Apache Kafka (org.apache.kafka:kafka_2.13) version fetched with Maven"
    )
    log4j_slf4j_version: str = Field(
        "2.24.3", description="log4j-slf4j-impl binding, so the broker's slf4j logs reach a file"
    )
    host: str = "127.0.0.1"
    port: int = Field(9092, description="client (PLAINTEXT) port")
    controller_port: int = Field(9093, description="KRaft controller port")
    heap: str = Field("512m", description="JVM -Xmx for the broker")
    cache_dir: Path = Field(default_factory=default_cache_dir)
    data_dir: Path | None = Field(
        None, description="storage, config, log and pid file; default <cache_dir>/broker-<port>"
    )
    internal_topic_partitions: int = Field(
        12, description="partitions of __consumer_offsets and __transaction_state"
    )
    start_timeout_s: float = 90.0
    retention_check_interval_ms: int = Field(
        300_000, description="how often the broker deletes segments past their retention"
    )

    def resolved_data_dir(self) -> Path:
        return self.data_dir or self.cache_dir / f"broker-{self.port}"

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"


class TopicSettings(BaseModel):
    """Names and sizes of the topics (docs/CONCEPTS.md, "Topics")."""

    prefix: str = Field("dcb.", description="prepended to every topic name")
    partitions: int = Field(
        6,
        description="commands, allocations, resolutions, events, certificates, results: "
        "more let more workers share the ledgers (a worker commits all its partitions in "
        "one transaction; dcb bench scale)",
    )
    tag_partitions: int = Field(
        12,
        description="tag deliveries: more let more workers share the tag work",
    )
    tag_placement: Literal["service", "tag"] = Field(
        "service",
        description="service: all tags of a service in one tag partition, so every commit is "
        "one-phase (services spread over the tag partitions); tag: a service's tags spread "
        "over the tag partitions (a service whose tag state outgrows one worker), and "
        "attempts spanning partitions commit in two phases. Fixed once the topics exist",
    )
    dead_letter_partitions: int = 3
    replication_factor: int = 1


class WorkerSettings(BaseModel):
    """The stream processors (``dcb worker``)."""

    app_id: str = Field(
        "dcb-worker", description="consumer group, transactional id and changelog topic prefix"
    )
    grace_ms: int = Field(
        10_000, description="reservation window: undecided attempts are fenced after it"
    )
    max_batch_records: int = Field(
        500,
        ge=1,
        description="a round takes at most this many input records (a batch record counts "
        "once); it takes what is ready, so the busier the worker, the bigger the round",
    )
    one_phase_in_round: bool = Field(
        True,
        description="a worker that owns every ledger partition has its own tag partitions "
        "decide one-phase attempts in the ledger's round: one transaction per commit, not "
        "three (with several workers, deliveries go by the topic)",
    )
    reconcile_interval_s: float = Field(1.0, description="how often the reconciler timer looks")
    report_interval_s: float = Field(
        30.0, gt=0, description="how often a busy worker logs its rounds and where they went"
    )
    metrics_port: int | None = Field(
        None,
        description="serve Prometheus /metrics on this port of metrics_host (off when unset: "
        "several workers on one machine would need one each)",
    )
    metrics_host: str = "127.0.0.1"
    instance_id: str | None = Field(
        None,
        description="ends the worker's transactional id; a worker started with the id of one "
        "that died aborts its open transaction at once; default: a fresh one per dcb worker, "
        "kept when its supervisor restarts it (two live workers must never share one)",
    )
    transaction_timeout_s: float = Field(
        5.0,
        gt=0,
        lt=SESSION_TIMEOUT_S,
        description="the broker aborts a dead worker's open transaction after this, before "
        f"the group ({SESSION_TIMEOUT_S:.0f} s session timeout) hands its partitions on; until "
        "then read_committed readers of the partitions it wrote wait",
    )
    stall_timeout_s: float = Field(
        30.0,
        gt=0,
        description="a worker whose round or takeover makes no progress for this long says so "
        "and exits (its supervisor starts it again), instead of hanging",
    )
    fault_injection: Literal["after-allocation-before-delivery"] | None = Field(
        None,
        description="tests only: act as if the worker died after allocating and before "
        "delivering to the tags named fault:*",
    )


class ConnectSettings(BaseModel):
    """The embedded Kafka Connect worker (``dcb connect``) and the sink it runs."""

    debezium_version: str = Field(
        "3.6.0.Final", description="io.debezium:debezium-connector-jdbc plugin bundle version"
    )
    host: str = "127.0.0.1"
    port: int = Field(8083, description="REST port")
    heap: str = Field("512m", description="JVM -Xmx for the Connect worker")
    data_dir: Path | None = Field(
        None, description="config, log and pid file; default <cache_dir>/connect-<port>"
    )
    group_id: str = Field("dcb-connect", description="Connect cluster group; names its topics")
    start_timeout_s: float = 120.0
    jdbc_url: str = Field(
        "jdbc:postgresql://127.0.0.1:5432/postgres",
        description="the database a sink writes projections into",
    )
    jdbc_user: str = "postgres"
    jdbc_password: str = ""

    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class ProjectionSettings(BaseModel):
    """The projection runner (``dcb project``)."""

    max_concurrent: int = Field(
        8, ge=1, description="projections of one process that advance at the same time"
    )
    max_batch_records: int = Field(500, ge=1, description="records read per poll")
    max_apply_per_pass: int = Field(
        5_000,
        ge=1,
        description="events one pass applies at most (one transaction): a catch-up over a "
        "long history goes in bounded transactions",
    )
    checkpoint_interval_s: float = Field(
        1.0,
        gt=0,
        description="a projection that applied nothing still records how far it read, this "
        "often (a pass that applied events commits at once)",
    )
    http_host: str = Field("127.0.0.1", description="where the runner serves lag and /metrics")
    http_port: int = Field(
        8090, ge=0, description="port of the runner's lag and /metrics endpoint (0: any free one)"
    )
    crash_at: str | None = Field(
        None,
        description="tests only: POINT@N kills the runner (SIGKILL) the N-th time it reaches "
        "POINT of a commit (before-rows, mid-rows, before-checkpoint, before-commit, "
        "after-commit)",
    )


class ArchiveSettings(BaseModel):
    """The history archive (``dcb archive``)."""

    backend: Literal["directory", "postgres"] = Field(
        "directory", description="where segments go: a local folder, or PostgreSQL"
    )
    dir: Path | None = Field(
        None, description="the directory backend's folder; default <cache_dir>/archive"
    )
    dsn: str | None = Field(
        None, description="the PostgreSQL backend's connection string (libpq form)"
    )
    segment_records: int = Field(10_000, ge=1, description="events per segment at most")
    crash_at: Literal["after-append"] | None = Field(
        None, description="tests only: exit after appending, before the log is truncated"
    )

    def folder(self, cache_dir: Path) -> Path:
        return self.dir or cache_dir / "archive"


class ErasureSettings(BaseModel):
    """Crypto-shredding (``dcb erase``): payloads of events with a subject tag are sealed
    under that subject's key."""

    subject_prefix: str | None = Field(
        None, description="tags with this prefix (e.g. user:) name a subject; unset: off"
    )
    key_store: Literal["file", "postgres"] = Field(
        "file", description="where subjects' keys live: a local file, or PostgreSQL"
    )
    key_file: Path | None = Field(None, description="the key store; default <cache_dir>/keys.json")
    key_store_dsn: str | None = Field(
        None, description="the PostgreSQL key store's connection string (libpq form)"
    )

    def key_path(self, cache_dir: Path) -> Path:
        return self.key_file or cache_dir / "keys.json"


class SecuritySettings(BaseModel):
    """How clients authenticate to the brokers (``dcb tenants create`` prints these)."""

    protocol: Protocol = Field(
        "PLAINTEXT", description="PLAINTEXT, or SASL_PLAINTEXT / SASL_SSL with a principal"
    )
    sasl_mechanism: Mechanism = "SCRAM-SHA-512"
    username: str | None = Field(None, description="the Kafka principal (User:<username>)")
    password: SecretStr | None = None


class DcbSettings(BaseSettings):
    """All of dcb-streams' configuration."""

    model_config = SettingsConfigDict(env_prefix="DCB_", env_nested_delimiter="__", extra="ignore")

    bootstrap_servers: str | None = Field(
        None, description="Kafka bootstrap servers; default: the embedded broker's address"
    )
    schema_registry_url: str | None = Field(
        None, description="when set, records use the Confluent wire format with this registry"
    )
    schema_dir: Path | None = Field(None, description="Avro schemas; default: the bundled ones")
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    topics: TopicSettings = Field(default_factory=TopicSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    projections: ProjectionSettings = Field(default_factory=ProjectionSettings)
    connect: ConnectSettings = Field(default_factory=ConnectSettings)
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    erasure: ErasureSettings = Field(default_factory=ErasureSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config_file = Path(os.environ.get(CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE))
        return (
            init_settings,
            env_settings,
            TomlConfigSettingsSource(settings_cls, toml_file=config_file),
        )

    @property
    def resolved_bootstrap_servers(self) -> str:
        return self.bootstrap_servers or self.broker.bootstrap_servers

    @property
    def kafka(self) -> KafkaConnection:
        """What every Kafka client of these settings connects with."""
        s = self.security
        return KafkaConnection(
            self.resolved_bootstrap_servers,
            protocol=s.protocol,
            mechanism=s.sasl_mechanism,
            username=s.username,
            password=s.password.get_secret_value() if s.password else None,
        )


def security_env(kafka: KafkaConnection) -> dict[str, str]:
    """The ``DCB_*`` variables that give a process ``kafka``'s address and login."""
    env = {"DCB_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    if kafka.protocol != "PLAINTEXT":
        env |= {
            "DCB_SECURITY__PROTOCOL": kafka.protocol,
            "DCB_SECURITY__SASL_MECHANISM": kafka.mechanism,
            "DCB_SECURITY__USERNAME": kafka.username or "",
            "DCB_SECURITY__PASSWORD": kafka.password or "",
        }
    return env
