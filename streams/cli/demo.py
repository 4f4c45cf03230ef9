"""``dcb demo``: the course-subscription example, end to end, as a new user first meets it."""

from __future__ import annotations

import random
import time
import uuid
from typing import Annotated, Any

import typer
from rich.progress import Progress
from rich.table import Table

from streams.cli.output import console, emit, reported
from streams.cli.services import embedded_broker, running_worker
from streams.demo.courses import define_courses, fold, run_subscriptions
from streams.model.records import Certificate
from streams.sdk import DcbClient
from streams.settings import DcbSettings

# A refused attempt is answered once decided; fencing its other tags goes on a moment after.
SETTLE_TIMEOUT_S = 10.0


def settled_certificate(client: DcbClient) -> Certificate | None:
    """The service's certificate once nothing is unresolved (or the newest after a while)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    certificate = client.certificate()
    while (certificate is None or certificate.unresolved_count) and time.monotonic() < deadline:
        time.sleep(0.1)
        certificate = client.certificate()
    return certificate


app = typer.Typer(
    help="The course-subscription example, end to end; `dcb demo projections`: its read "
    "model arriving in PostgreSQL.",
    no_args_is_help=False,
)


def student_wishes(
    students: int, capacity_of: dict[str, int], limit: int, seed: int
) -> list[tuple[str, str]]:
    """Each student wants one course more than the limit allows, in a shuffled order."""
    rng = random.Random(seed)
    wishes = [
        (f"s{s + 1}", course)
        for s in range(students)
        for course in rng.sample(sorted(capacity_of), min(limit + 1, len(capacity_of)))
    ]
    rng.shuffle(wishes)
    return wishes


@app.callback(invoke_without_command=True)
def demo(
    ctx: typer.Context,
    keep_broker: Annotated[
        bool, typer.Option(help="Leave the broker running when the demo started it.")
    ] = False,
    students: Annotated[int, typer.Option(help="How many students.")] = 24,
    courses: Annotated[int, typer.Option(help="How many courses.")] = 4,
    capacity: Annotated[int, typer.Option(help="Seats per course.")] = 4,
    limit: Annotated[int, typer.Option(help="Courses a student may take.")] = 2,
    writers: Annotated[int, typer.Option(help="Concurrent students at a time.")] = 8,
    seed: Annotated[int, typer.Option(help="Random seed of the students' wishes.")] = 7,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Start the broker and a worker, then let concurrent students subscribe to courses."""
    if ctx.invoked_subcommand is not None:
        return
    settings = DcbSettings()
    service = f"demo-{uuid.uuid4().hex[:8]}"
    capacity_of = {f"c{i + 1}": capacity for i in range(courses)}
    wishes = student_wishes(students, capacity_of, limit, seed)
    log = settings.broker.cache_dir / "demo-worker.log"
    with (
        reported(as_json),
        embedded_broker(settings, keep_broker, as_json),
        running_worker(settings, log),
        DcbClient(service_id=service, settings=settings, timeout_s=120) as client,
    ):
        t0 = time.monotonic()
        with console.status("defining the courses..."):
            define_courses(client, capacity_of)
        with Progress(console=console, disable=as_json, transient=True) as bar:
            task = bar.add_task(f"{len(wishes)} subscriptions", total=len(wishes))
            report = run_subscriptions(
                client,
                wishes,
                capacity_of,
                limit,
                writers,
                lambda _: bar.advance(task),
            )
        elapsed = time.monotonic() - t0
        log_events = client.read()
        certificate = settled_certificate(client)
    per_course, per_student = fold(log_events)
    sound = all(per_course[c] <= capacity_of[c] for c in capacity_of) and all(
        n <= limit for n in per_student.values()
    )
    data: dict[str, Any] = {
        "service": service,
        "subscriptions": len(report.committed),
        "refused": [o.__dict__ for o in report.refused],
        "conflictsRetried": sum(o.retries for o in report.outcomes),
        "seats": {c: {"taken": per_course[c], "capacity": capacity_of[c]} for c in capacity_of},
        "rulesHeld": sound,
        "seconds": round(elapsed, 1),
        "certificate": certificate.to_avro() if certificate else None,
    }

    def text() -> None:
        seats = Table("course", "seats taken", "capacity", title="committed subscriptions")
        for c in capacity_of:
            seats.add_row(c, str(per_course[c]), str(capacity_of[c]))
        console.print(seats)
        reasons = Table("student", "course", "why refused", title="refused by the rules")
        for o in sorted(report.refused, key=lambda o: (o.course, o.student))[:12]:
            reasons.add_row(o.student, o.course, o.reason)
        if len(report.refused) > 12:
            reasons.add_row("…", "…", f"and {len(report.refused) - 12} more")
        console.print(reasons)
        console.print(
            f"{len(report.committed)} subscriptions committed, {len(report.refused)} refused, "
            f"{data['conflictsRetried']} append-condition conflicts retried, by {writers} "
            f"concurrent students in {elapsed:.1f}s"
        )
        if certificate is not None:
            console.print(
                f"certificate: closed prefix {certificate.closed_prefix_suid}, "
                f"{certificate.unresolved_count} unresolved, status {certificate.status}, "
                f"lineage {certificate.allocator_lineage_id}"
            )
        verdict = "[green]held[/]" if sound else "[red]BROKEN[/]"
        console.print(f"capacity and student limits, folded over the whole log: {verdict}")

    emit(as_json, data, text)
    if not sound:
        raise typer.Exit(1)
