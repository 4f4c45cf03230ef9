"""``dcb broker``: the embedded single-node Kafka broker."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from streams.cli.output import console, emit, reported
from streams.infra.broker import BrokerStatus, EmbeddedBroker
from streams.settings import DcbSettings, security_env

app = typer.Typer(help="Run the embedded Apache Kafka broker (KRaft, one node, 127.0.0.1).")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
PortOpt = Annotated[int | None, typer.Option("--port", help="Client port (default 9092).")]


def embedded_broker(port: int | None = None) -> EmbeddedBroker:
    settings = DcbSettings()
    broker = settings.broker
    if port is not None:
        broker = broker.model_copy(update={"port": port, "controller_port": port + 1})
    return EmbeddedBroker(broker)


def _status_dict(status: BrokerStatus) -> dict[str, object]:
    return {
        "running": status.running,
        "pid": status.pid,
        "bootstrapServers": status.bootstrap_servers,
        "dataDir": str(status.data_dir),
        "logFile": str(status.log_file),
        "secure": status.secure,
    }


@app.command()
def fetch(as_json: JsonOpt = False) -> None:
    """Fetch Apache Kafka's jars from Maven Central into the cache (once)."""
    broker = embedded_broker()
    with reported(as_json):
        cached = broker.is_fetched()
        started = time.monotonic()
        with console.status(f"fetching Kafka {broker.settings.kafka_version} with Maven..."):
            libs = broker.fetch()
        took = time.monotonic() - started
    emit(
        as_json,
        {"libs": str(libs), "cached": cached, "seconds": round(took, 2)},
        lambda: console.print(
            f"Kafka jars {'already cached' if cached else f'fetched in {took:.1f}s'} in {libs}"
        ),
    )


SecureOpt = Annotated[
    bool,
    typer.Option(
        "--secure",
        help="A new data folder: SASL/SCRAM logins and ACLs (StandardAuthorizer); prints the "
        "admin's client settings. A folder formatted so stays secure.",
    ),
]


@app.command()
def start(port: PortOpt = None, secure: SecureOpt = False, as_json: JsonOpt = False) -> None:
    """Start the broker (fetching Kafka first if needed) and wait until it answers."""
    broker = embedded_broker(port)
    with reported(as_json):
        started = time.monotonic()
        with console.status("starting the Kafka broker..."):
            status = broker.start(secure=secure)
        took = time.monotonic() - started
    admin = security_env(broker.admin_connection()) if status.secure else {}

    def text() -> None:
        console.print(
            f"broker ready in {took:.1f}s (pid {status.pid}); "
            f"bootstrap servers: [bold]{status.bootstrap_servers}[/]"
        )
        if admin:
            console.print("SASL/SCRAM and ACLs on; the admin's client settings:")
            console.print("\n".join(f"{k}={v}" for k, v in admin.items()), highlight=False)

    emit(as_json, {**_status_dict(status), "seconds": round(took, 2), "admin": admin}, text)


@app.command()
def stop(port: PortOpt = None, as_json: JsonOpt = False) -> None:
    """Stop the broker this data folder's pid file names (and nothing else)."""
    broker = embedded_broker(port)
    with reported(as_json):
        stopped = broker.stop()
    emit(
        as_json,
        {"stopped": stopped},
        lambda: console.print("broker stopped" if stopped else "no broker was running"),
    )


@app.command()
def status(port: PortOpt = None, as_json: JsonOpt = False) -> None:
    """Say whether the broker is running, with its pid and address. Exit 3 when it is not."""
    current = embedded_broker(port).status()
    emit(as_json, _status_dict(current), lambda: console.print(current.describe()))
    if not current.running:
        raise typer.Exit(3)
