"""``dcb bench``: benchmarks on this machine, written under ``bench/results/``."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from streams.bench.archive import ArchiveBenchReport, ArchivePlan, run_archive_bench
from streams.bench.commit import (
    PLACEMENTS,
    TAG_SPREAD,
    BenchPlan,
    CommitBenchReport,
    Placement,
    machine,
    run_commit_bench,
)
from streams.bench.exclusive import exclusive
from streams.bench.lifecycle import LifecyclePlan, run_lifecycle_bench
from streams.bench.peers import report as peers_report
from streams.bench.peers.api import PeerSystem
from streams.bench.peers.bench import (
    PEER_WARM_PASS_S,
    PeerBenchReport,
    PeerPlan,
    run_peers_bench,
)
from streams.bench.peers.dcb_streams import DcbStreams
from streams.bench.peers.eventsourcing_pg import EventsourcingPostgres
from streams.bench.peers.umadb import UmaDb
from streams.bench.projections import ProjectionBenchReport, ProjectionPlan, run_projection_bench
from streams.bench.report import (
    PlotUnavailableError,
    write_archive_plot,
    write_json,
    write_plot,
    write_projection_plot,
    write_scale_plot,
)
from streams.bench.scale import (
    DEFAULT_LAYOUTS,
    Layout,
    ScaleBenchReport,
    ScalePlan,
    run_scale_bench,
)
from streams.cli.output import console, emit, reported
from streams.cli.services import embedded_broker
from streams.kafka import clients
from streams.kafka.topic_admin import delete_topics_with_prefix
from streams.kafka.topic_catalog import owned_prefixes
from streams.settings import DcbSettings

app = typer.Typer(
    help="Benchmarks, run against a real broker on this machine.", no_args_is_help=True
)


# A fresh broker JVM compiles for its first ~20 s of load: each bench warms up first.
WarmPass = Annotated[
    float,
    typer.Option(
        help="Unmeasured seconds at the largest load before each system's (or layout's) runs."
    ),
]


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from exc
    if not values or min(values) < 1:
        raise typer.BadParameter(f"expected positive integers, got {text!r}")
    return values


def _progress(quiet: bool) -> Progress:
    """The bar a bench advances by the seconds it has run (hidden with ``--json``)."""
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
        transient=True,
        # Redrawn ten times a second by default: 8% of the Python time of the peer bench's
        # process (whose writers' client library is measured) at 64 writers, for a bar
        # that counts seconds.
        refresh_per_second=1,
    )


def _bench_settings(run: str) -> DcbSettings:
    """The user's settings with this run's own topics and app id."""
    settings = DcbSettings()
    topics = settings.topics.model_copy(update={"prefix": f"dcb-bench-{run}."})
    worker = settings.worker.model_copy(update={"app_id": f"dcb-bench-{run}-worker"})
    return settings.model_copy(update={"topics": topics, "worker": worker})


@contextmanager
def _bench_run(as_json: bool, name: str) -> Iterator[tuple[DcbSettings, Path]]:
    """This run's settings (topics and app id of its own) and scratch folder; errors end
    the command as JSON or text."""
    settings = _bench_settings(uuid.uuid4().hex[:8])
    with (
        reported(as_json),
        exclusive(settings.broker.cache_dir, name.replace("-", " ")),
        tempfile.TemporaryDirectory(prefix=f"{name}-") as scratch,
    ):
        yield settings, Path(scratch)


def _with_plot(written: list[Path], plot: Callable[[], Path]) -> list[Path]:
    """``written`` and the plot ``plot`` draws, unless matplotlib is missing (a warning)."""
    try:
        return [*written, plot()]
    except PlotUnavailableError as exc:
        console.print(f"[yellow]{exc}[/]")
        return written


def _placements(text: str) -> list[Placement]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    placements = [p for p in PLACEMENTS if p in chosen]
    if not placements or len(placements) != len(chosen):
        raise typer.BadParameter(f"placements are some of {', '.join(PLACEMENTS)}; got {text!r}")
    return placements


@app.command()
def commit(
    writers: Annotated[str, typer.Option(help="Concurrent writer counts.")] = "1,8,64",
    tags: Annotated[str, typer.Option(help="Tags per event.")] = "1,3",
    services: Annotated[str, typer.Option(help="Services the writers spread over.")] = "1,100",
    placements: Annotated[
        str,
        typer.Option(
            help="Tag placements, each on topics and a worker of its own (service: every "
            "commit one-phase; tag: attempts spanning tag partitions in two phases)."
        ),
    ] = "service,tag",
    warmup: Annotated[float, typer.Option(help="Seconds of warm-up per scenario.")] = 3.0,
    measure: Annotated[float, typer.Option(help="Seconds measured per scenario.")] = 10.0,
    warm_pass: WarmPass = 20.0,
    core_events: Annotated[
        int,
        typer.Option(
            min=0,
            help="Events the processors' own code runs without Kafka, per placement, tag "
            "count and batch size (its CPU per event beside the worker's); 0: not measured.",
        ),
    ] = 3000,
    core_batches: Annotated[
        str, typer.Option(help="Commands per round into the processors run without Kafka.")
    ] = "1,64",
    tag_spread: Annotated[
        int,
        typer.Option(
            min=1,
            help="Distinct values per tag position; 1: every event at the same tags (busy "
            "tags whose history grows through the run).",
        ),
    ] = TAG_SPREAD,
    out: Annotated[Path, typer.Option(help="Folder of commit.json and commit.png.")] = Path(
        "bench/results"
    ),
    keep_broker: Annotated[
        bool, typer.Option(help="Leave the broker running when the bench started it.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Commit throughput, latency and cost through the SDK, beside raw transactional Kafka."""
    plan = BenchPlan(
        writers=_ints(writers),
        tags=_ints(tags),
        services=_ints(services),
        placements=_placements(placements),
        warmup_s=warmup,
        measure_s=measure,
        warm_pass_s=warm_pass,
        core_events=core_events,
        core_batches=_ints(core_batches),
        tag_spread=tag_spread,
    )
    with _bench_run(as_json, "dcb-bench") as (settings, _):
        with embedded_broker(settings, keep_broker, as_json):
            try:
                with _progress(as_json) as bar:
                    task = bar.add_task("benchmarking", total=plan.seconds)
                    report = run_commit_bench(settings, plan, lambda s: bar.advance(task, s), out)
            finally:
                delete_topics_with_prefix(
                    clients.admin(settings.kafka),
                    owned_prefixes(settings),
                )
        written = _with_plot([write_json(report, out)], lambda: write_plot(report, out))
        emit(as_json, report.model_dump(mode="json"), lambda: _print(report, written))


@app.command()
def scale(
    layouts: Annotated[
        str,
        typer.Option(
            help="Layouts WORKERSxPARTITIONSxTAG_PARTITIONS, comma-separated; "
            "the first is the default one."
        ),
    ] = ",".join(DEFAULT_LAYOUTS),
    writers: Annotated[str, typer.Option(help="Concurrent writer counts.")] = "8,64",
    tags: Annotated[int, typer.Option(min=1, help="Tags per event.")] = 3,
    services: Annotated[int, typer.Option(min=1, help="Services the writers spread over.")] = 100,
    warmup: Annotated[float, typer.Option(help="Seconds of warm-up per scenario.")] = 3.0,
    measure: Annotated[float, typer.Option(help="Seconds measured per scenario.")] = 10.0,
    warm_pass: WarmPass = 20.0,
    out: Annotated[Path, typer.Option(help="Folder of scale.json and scale.png.")] = Path(
        "bench/results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """How cost grows with worker processes and partition counts (events/s, latency, CPU)."""
    plan = ScalePlan(
        layouts=_layouts(layouts),
        writers=_ints(writers),
        tags=tags,
        services=services,
        warmup_s=warmup,
        measure_s=measure,
        warm_pass_s=warm_pass,
    )
    with _bench_run(as_json, "dcb-bench-scale") as (settings, _):
        with embedded_broker(settings, False, as_json), _progress(as_json) as bar:
            task = bar.add_task("benchmarking layouts", total=plan.seconds)
            report = run_scale_bench(settings, plan, out, lambda s: bar.advance(task, s))
        written = _with_plot(
            [write_json(report, out, "scale.json")], lambda: write_scale_plot(report, out)
        )
        emit(as_json, report.model_dump(mode="json"), lambda: _print_scale(report, written))


@app.command()
def projections(
    events: Annotated[int, typer.Option(min=100, help="Events of the throughput stream.")] = 20_000,
    writers: Annotated[int, typer.Option(min=1, help="Writers of the latency run.")] = 8,
    measure: Annotated[float, typer.Option(help="Seconds of the latency run.")] = 20.0,
    out: Annotated[Path, typer.Option(help="Folder of projections.json and .png.")] = Path(
        "bench/results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """The gated runner against an ungated consumer of the same stream, and commit -> applied
    and commit -> row in PostgreSQL (through Kafka Connect) under load."""
    plan = ProjectionPlan(events=events, writers=writers, measure_s=measure)
    with _bench_run(as_json, "dcb-bench-projections") as (settings, scratch):
        with embedded_broker(settings, False, as_json), _progress(as_json) as bar:
            task = bar.add_task("benchmarking projections", total=plan.seconds)
            try:
                report = run_projection_bench(
                    settings, plan, scratch, lambda s: bar.advance(task, s)
                )
            finally:
                delete_topics_with_prefix(clients.admin(settings.kafka), owned_prefixes(settings))
        written = _with_plot(
            [write_json(report, out, "projections.json")],
            lambda: write_projection_plot(report, out),
        )
        emit(as_json, report.model_dump(mode="json"), lambda: _print_projections(report, written))


@app.command()
def archive(
    segments: Annotated[int, typer.Option(min=1, help="Segments per backend.")] = 40,
    records: Annotated[int, typer.Option(min=1, help="Records per segment.")] = 1_000,
    events: Annotated[
        int, typer.Option(min=2, help="Events of the history read across the boundary.")
    ] = 5_000,
    appends: Annotated[
        int, typer.Option(min=1, help="Appends of each kind (with / without a subject tag).")
    ] = 200,
    out: Annotated[Path, typer.Option(help="Folder of archive.json and .png.")] = Path(
        "bench/results"
    ),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """The archive's backends (a local directory, PostgreSQL) appending and reading the
    same segments, and what sealing a payload for crypto-shredding costs per event; then,
    on the broker with a worker, a history read across the archive boundary against the
    hot log alone, and append latency with and without a subject tag."""
    plan = ArchivePlan(segments=segments, records_per_segment=records)
    live = LifecyclePlan(events=events, appends=appends)
    with _bench_run(as_json, "dcb-bench-archive") as (settings, scratch):
        with _progress(as_json) as bar:
            task = bar.add_task("benchmarking the archive", total=5)

            def step(what: str) -> None:
                bar.update(task, description=f"archive: {what}", advance=1)

            report = run_archive_bench(plan, scratch, machine(), step)
            with embedded_broker(settings, False, True):
                try:
                    report.lifecycle = run_lifecycle_bench(settings, live, scratch, step)
                finally:
                    delete_topics_with_prefix(
                        clients.admin(settings.kafka), owned_prefixes(settings)
                    )
        written = _with_plot(
            [write_json(report, out, "archive.json")], lambda: write_archive_plot(report, out)
        )
    emit(as_json, report.model_dump(mode="json"), lambda: _print_archive(report, written))


def _print_archive(report: ArchiveBenchReport, written: list[Path]) -> None:
    table = Table(
        "backend", "append MB/s", "read whole MB/s", "ranged read MB/s", title="dcb bench archive"
    )
    for b in report.backends:
        table.add_row(
            b.backend, f"{b.append_mb_per_s}", f"{b.read_all_mb_per_s}", f"{b.ranged_read_mb_per_s}"
        )
    console.print(table)
    s = report.sealing
    console.print(
        f"sealing a {s.payload_bytes}-byte payload: {s.seal_us} us, opening it: {s.open_us} us "
        f"(json.dumps of it: {s.json_dumps_us} us)"
    )
    if (live := report.lifecycle) is not None:
        read, sealed = live.boundary, live.appends
        table = Table("measure", "hot log alone", "across the boundary / sealed")
        table.add_row(
            f"first read of {read.events:,} events ({read.archived:,} archived), s",
            f"{read.hot_log_s}",
            f"{read.across_s}",
        )
        table.add_row(
            f"append p50 / p99 ms ({sealed.appends} of each, two tags)",
            f"{sealed.plain_p50_ms} / {sealed.plain_p99_ms}",
            f"{sealed.sealed_p50_ms} / {sealed.sealed_p99_ms}",
        )
        console.print(table)
    console.print(f"written: {', '.join(map(str, written))}")


def _print_projections(report: ProjectionBenchReport, written: list[Path]) -> None:
    t, lat = report.throughput, report.latency
    table = Table("measure", "value", "aim", title="dcb bench projections")
    table.add_row("ungated consumer, events/s", f"{t.ungated_events_per_s:,.0f}", "")
    table.add_row("gated runner, events/s", f"{t.gated_events_per_s:,.0f}", "")
    table.add_row("gated / ungated", f"{t.ratio:.2f}", ">= 0.80")
    table.add_row(
        "commit -> applied p50 / p99 ms",
        f"{lat.commit_to_applied_p50_ms} / {lat.commit_to_applied_p99_ms}",
        "p99 <= 500",
    )
    table.add_row(
        "commit -> row in PostgreSQL p50 / p99 ms",
        f"{lat.commit_to_postgres_p50_ms} / {lat.commit_to_postgres_p99_ms}",
        "p99 <= 2000",
    )
    console.print(table)
    console.print(f"{lat.commits} commits measured; written: {', '.join(map(str, written))}")


def _layouts(text: str) -> list[Layout]:
    try:
        parsed = [Layout.parse(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:  # pydantic's ValidationError is one too
        raise typer.BadParameter(str(exc)) from exc
    if not parsed:
        raise typer.BadParameter("expected at least one layout, e.g. 1x6x12")
    return parsed


def _print_scale(report: ScaleBenchReport, written: list[Path]) -> None:
    table = Table(
        "workers",
        "partitions",
        "tag partitions",
        "writers",
        "events/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "broker cores",
        "worker cores",
        "CPU ms/event",
    )
    for r in report.results:
        s = r.result
        table.add_row(
            str(r.layout.workers),
            str(r.layout.partitions),
            str(r.layout.tag_partitions),
            str(s.writers),
            f"{s.events_per_s:.1f}",
            f"{s.p50_ms:.0f}",
            f"{s.p99_ms:.0f}",
            str(s.failed),
            f"{r.broker_cores:.2f}",
            " + ".join(f"{c:.2f}" for c in r.worker_cores),
            f"{r.cpu_ms_per_event:.1f}" if r.cpu_ms_per_event is not None else "",
        )
    console.print(table)
    console.print("written: " + ", ".join(str(p) for p in written))


PEERS = ("dcb-streams", "eventsourcing-postgres", "umadb")
# dcb-streams with its writers as threads sharing a DcbClient (asked for by name)
THREADED = "dcb-streams-threads"
CLUTTERED_BROKER = 1000  # other topics' partitions on the broker worth a warning


def _peer_systems(
    names: list[str],
    settings: DcbSettings,
    scratch: Path,
    out: Path,
    writers: int,
    build_umadb: bool,
) -> list[PeerSystem]:
    made: list[PeerSystem] = []
    for name in names:
        if name in (DcbStreams.name, THREADED):
            coroutines = name == DcbStreams.name
            made.append(DcbStreams(settings, out / "peers-worker.log", coroutines))
        elif name == EventsourcingPostgres.name:
            made.append(EventsourcingPostgres(scratch / "postgres", pool_size=writers + 2))
        elif name == UmaDb.name:
            cache = DcbSettings().broker.cache_dir if build_umadb else None
            made.append(UmaDb(scratch / "umadb", build_cache=cache))
    return made


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = (*PEERS, THREADED)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise typer.BadParameter(f"systems are some of {', '.join(known)}; got {text!r}")
    return names


@app.command()
def peers(
    writers: Annotated[str, typer.Option(help="Concurrent writer counts.")] = "1,8,64,256",
    systems: Annotated[
        str,
        typer.Option(
            help=f"Systems, run in this order ({THREADED}: dcb-streams, its writers threads)."
        ),
    ] = ",".join(PEERS),
    warmup: Annotated[float, typer.Option(help="Seconds of warm-up per scenario.")] = 5.0,
    measure: Annotated[float, typer.Option(help="Seconds measured per scenario.")] = 30.0,
    warm_pass: WarmPass = PEER_WARM_PASS_S,
    out: Annotated[Path, typer.Option(help="Folder of peers.json, peers.png and peers.md.")] = Path(
        "bench/results"
    ),
    build_umadb: Annotated[
        bool,
        typer.Option(
            help="Build the UmaDB server with cargo (once, cached; protoc from Maven Central); "
            "--no-build-umadb runs the one the PyPI wheel ships."
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """The DCB course-subscription workload on dcb-streams, eventsourcing (PostgreSQL), UmaDB."""
    plan = PeerPlan(
        writers=_ints(writers), warmup_s=warmup, measure_s=measure, warm_pass_s=warm_pass
    )
    names = _names(systems)
    with (
        _bench_run(as_json, "dcb-bench-peers") as (settings, scratch),
        _progress(as_json) as bar,
    ):
        made = _peer_systems(names, settings, scratch, out, max(plan.writers), build_umadb)
        diagnosed = any(isinstance(s, DcbStreams) and s.writes_in_asyncio for s in made)
        task = bar.add_task("benchmarking peers", total=plan.seconds(len(made), diagnosed))
        report = run_peers_bench(made, plan, out, lambda s: bar.advance(task, s))
        written = _with_plot(
            [write_json(report, out, "peers.json"), peers_report.write_markdown(report, out)],
            lambda: peers_report.write_plot(report, out),
        )
        emit(as_json, report.model_dump(mode="json"), lambda: _print_peers(report, written))


def _print_peers(report: PeerBenchReport, written: list[Path]) -> None:
    console.print(peers_report.markdown(report), soft_wrap=True, markup=False)
    console.print("written: " + ", ".join(str(p) for p in written))


def _print(report: CommitBenchReport, written: list[Path]) -> None:
    table = Table(
        "system",
        "placement",
        "writers",
        "tags",
        "services",
        "events/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "vs raw",
    )
    for r in report.raw + report.dcb:
        ratio = report.ratios.get(r.key) if r.system == "dcb" else None
        table.add_row(
            r.system,
            r.placement or "",
            str(r.writers),
            str(r.tags),
            str(r.services),
            f"{r.events_per_s:.1f}",
            f"{r.p50_ms:.0f}",
            f"{r.p99_ms:.0f}",
            str(r.failed),
            f"{ratio:.0%}" if ratio is not None else "",
        )
    console.print(table)
    if report.core:
        core = Table(
            "processors' own code, without Kafka",
            "tags",
            "commands per round",
            "CPU us per event",
            "outputs per event",
            "changelog writes per event",
        )
        for c in report.core:
            core.add_row(
                f"{c.placement} placement",
                str(c.tags),
                str(c.batch),
                f"{c.cpu_us_per_event:.0f}",
                f"{c.outputs_per_event:.2f}",
                f"{c.writes_per_event:.2f}",
            )
        console.print(core)
    if report.worker:
        cpu = Table("dcb worker's CPU", "cores", "us per committed event")
        for cost in report.worker:
            per_event = cost.cpu_us_per_event
            cpu.add_row(cost.scenario, f"{cost.cores:.2f}", f"{per_event:.0f}" if per_event else "")
        console.print(cpu)
    if report.batches:
        hops = [hop.hop for hop in report.batches[0].hops]
        sizes = Table("items per record: p50 / p90 / max", *hops)
        for scenario in report.batches:
            sizes.add_row(
                scenario.scenario,
                *(
                    f"{h.p50:.0f} / {h.p90:.0f} / {h.max}" if h.records else "no records"
                    for h in scenario.hops
                ),
            )
        console.print(sizes)
    for breakdown in report.hops:
        hop_table = Table(f"hop ({breakdown.scenario}: {breakdown.path})", "p50 ms", "p99 ms")
        for hop in breakdown.hops:
            hop_table.add_row(hop.name, f"{hop.p50_ms:.0f}", f"{hop.p99_ms:.0f}")
        console.print(hop_table)
    others = report.settings.get("broker_other_partitions", 0)
    if isinstance(others, int) and others > CLUTTERED_BROKER:
        console.print(
            f"[yellow]the broker held {others} partitions of other topics: a cluttered broker "
            "measures lower (a fresh one: dcb broker stop, then remove its data folder)[/]"
        )
    console.print("written: " + ", ".join(str(p) for p in written))
