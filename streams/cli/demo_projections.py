"""``dcb demo projections``: the course rosters arriving in PostgreSQL while students
subscribe, through the projection runner and a Kafka Connect sink, with the lag."""

from __future__ import annotations

import json
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table

from streams.cli.demo import student_wishes
from streams.cli.output import console, emit, reported
from streams.cli.services import embedded_broker, running_worker
from streams.demo.courses import define_courses, run_subscriptions
from streams.demo.projections import course_rosters, registry
from streams.errors import DcbError
from streams.infra.connect import EmbeddedConnect
from streams.infra.ports import free_port
from streams.infra.postgres import LocalPostgres
from streams.projections.runner import run_projections
from streams.projections.sink import connector_name, sink_config, table_name
from streams.sdk import DcbClient
from streams.settings import DcbSettings

CATCH_UP_S = 120.0


def _rows(pg: LocalPostgres, service: str) -> dict[str, list[str]]:
    """Course -> students, as the sink wrote them into PostgreSQL (nothing before it has)."""
    table = table_name(course_rosters.id)
    if pg.query(f"SELECT to_regclass('{table}') IS NOT NULL") != [["t"]]:
        return {}
    found = pg.query(f"SELECT course, students FROM {table} WHERE row_id LIKE '{service}/%'")
    return {course: json.loads(students) for course, students in found}


def _lag(port: int) -> dict[str, Any] | None:
    url = f"http://127.0.0.1:{port}/projections/{course_rosters.id}"
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            lag: dict[str, Any] = json.loads(response.read())
            return lag
    except OSError:
        return None


def _view(committed: int, rows: dict[str, list[str]], lag: dict[str, Any] | None) -> Table:
    table = Table("subscriptions committed", "students in PostgreSQL", "events behind")
    table.add_column("lag bound / SafeWindow")
    behind = "-" if lag is None else str(lag["events_behind"])
    window = "-" if lag is None else f"{lag['lag_bound_s']:.2f} s / {lag['safe_window_s']:.1f} s"
    table.add_row(str(committed), str(sum(map(len, rows.values()))), behind, window)
    return table


def projections(
    keep_broker: Annotated[
        bool, typer.Option(help="Leave the broker running when the demo started it.")
    ] = False,
    students: Annotated[int, typer.Option(help="How many students.")] = 40,
    courses: Annotated[int, typer.Option(help="How many courses.")] = 6,
    capacity: Annotated[int, typer.Option(help="Seats per course.")] = 5,
    limit: Annotated[int, typer.Option(help="Courses a student may take.")] = 2,
    writers: Annotated[int, typer.Option(help="Concurrent students at a time.")] = 8,
    seed: Annotated[int, typer.Option(help="Random seed of the students' wishes.")] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Students subscribe while the course rosters land in PostgreSQL: the broker, a
    worker, the projection runner, PostgreSQL and Kafka Connect with the Debezium JDBC
    sink, all started here (Connect and its sink are fetched on the first run)."""
    settings = DcbSettings()
    http_port = free_port()
    settings.projections.http_port = http_port
    service = f"demo-{uuid.uuid4().hex[:8]}"
    capacity_of = {f"c{i + 1}": capacity for i in range(courses)}
    wishes = student_wishes(students, capacity_of, limit, seed)
    stop = threading.Event()
    with (
        reported(as_json),
        embedded_broker(settings, keep_broker, as_json),
        running_worker(settings, settings.broker.cache_dir / "demo-worker.log"),
        LocalPostgres(Path(tempfile.mkdtemp(prefix="dcb-demo-pg-"))) as pg,
        DcbClient(service_id=service, settings=settings, timeout_s=120) as client,
    ):
        settings.connect.jdbc_url = f"jdbc:postgresql://127.0.0.1:{pg.port}/postgres"
        connect = EmbeddedConnect(settings)
        started_connect = not connect.status().running
        with console.status("starting Kafka Connect (the first run fetches it and the sink)..."):
            connect.start()
        runner = threading.Thread(target=run_projections, args=(registry, settings, stop))
        runner.start()
        sink = connector_name(course_rosters.id)
        try:
            with console.status("deploying the sink of course-rosters..."):
                connect.deploy(sink, sink_config(settings, course_rosters.id))
                define_courses(client, capacity_of)
            committed = Counter[str]()  # decided wishes, by how
            done = threading.Event()

            def subscribe() -> None:
                run_subscriptions(
                    client,
                    wishes,
                    capacity_of,
                    limit,
                    writers,
                    lambda o: committed.update(["subscribed" if o.subscribed else "refused"]),
                )
                done.set()

            t0 = time.monotonic()
            threading.Thread(target=subscribe, daemon=True).start()
            expected: dict[str, list[str]] = {}
            live = Live(_view(0, {}, None), console=console, transient=False)
            with live if not as_json else nullcontext():
                deadline = time.monotonic() + CATCH_UP_S
                while True:
                    rows, lag = _rows(pg, service), _lag(http_port)
                    if not as_json:
                        live.update(_view(committed["subscribed"], rows, lag))
                    if done.is_set() and not expected:
                        expected = _log_rosters(client)
                    if (expected and rows == expected) or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
            elapsed = time.monotonic() - t0
            lag = _lag(http_port)
        finally:
            stop.set()
            runner.join(30)
            with suppress(DcbError):  # absent when its deploy failed
                connect.remove(sink)
            if started_connect:
                connect.stop()
    held = bool(expected) and rows == expected
    data = {
        "service": service,
        "subscriptions": committed["subscribed"],
        "rowsInPostgres": rows,
        "lag": lag,
        "seconds": round(elapsed, 1),
        "postgresEqualsLog": held,
    }

    def text() -> None:
        table = Table(
            "course", "students (in PostgreSQL, in subscription order)", title="course_rosters"
        )
        for course in sorted(rows):
            table.add_row(course, ", ".join(rows[course]))
        console.print(table)
        if lag is not None:
            console.print(
                f"lag: {lag['events_behind']} events behind, lag bound {lag['lag_bound_s']:.2f} s,"
                f" SafeWindow {lag['safe_window_s']:.1f} s"
            )
        verdict = "[green]equal[/]" if held else "[red]NOT equal[/]"
        console.print(
            f"{committed['subscribed']} subscriptions in {elapsed:.1f}s; the table in PostgreSQL"
            f" and the log: {verdict}"
        )

    emit(as_json, data, text)
    if not held:
        raise typer.Exit(1)


def _log_rosters(client: DcbClient) -> dict[str, list[str]]:
    """Course -> students in position order, folded from the log itself."""
    rosters: dict[str, list[str]] = {}
    for e in client.read():
        if e.event.event_type == "StudentSubscribed":
            body = json.loads(e.event.payload)
            rosters.setdefault(body["course"], []).append(body["student"])
    return rosters
