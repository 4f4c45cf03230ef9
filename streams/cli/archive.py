"""``dcb archive``: move a service's certified history into the archive, and audit it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.progress import Progress

from streams.archive import open_archive
from streams.archive.history import archive_service, audit
from streams.cli.output import console, emit, reported
from streams.errors import ValidationError
from streams.settings import DcbSettings

Service = Annotated[
    str | None, typer.Option("--service", "-s", help="The service whose history moves.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]

app = typer.Typer(
    help="The history archive: `dcb archive --service S --through SUID` moves S's events "
    "up to a certified SUID into the archive (DCB_ARCHIVE__BACKEND) and lets the hot log "
    "drop what every service and projection is done with; `dcb archive audit` checks it.",
    no_args_is_help=False,
)


@app.callback(invoke_without_command=True)
def archive(
    ctx: typer.Context,
    service: Service = None,
    through: Annotated[
        str | None, typer.Option(help="The last SUID to archive (at most the certified prefix).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Archive a service's events through a certified SUID, then truncate the hot log."""
    if ctx.invoked_subcommand is not None:
        return
    with reported(as_json):
        if service is None or through is None:
            raise ValidationError("dcb archive needs --service and --through (or a subcommand)")
        settings = DcbSettings()
        store = open_archive(settings)
        with Progress(console=console, disable=as_json, transient=True) as bar:
            task = bar.add_task(f"archiving {service}", total=None)
            report = archive_service(
                settings,
                store,
                service,
                through,
                lambda done, total: bar.update(task, completed=done, total=total),
            )

    def text() -> None:
        console.print(
            f"{report.service}: {report.events} event(s) archived in {report.segments} "
            f"segment(s) through {report.through}; dcb.events[{report.partition}] now starts "
            f"at offset {report.truncated_below} ({report.dropped} record(s) dropped)"
        )
        if report.held_back_by:
            console.print(f"the log keeps the rest for {report.held_back_by}")
        if report.trim_requested:
            console.print(
                f"the tag tables of {report.service} were asked to drop their events through "
                f"{report.through} (the worker refuses, in its dead letters, a trim above "
                "the certified prefix)"
            )

    emit(as_json, asdict(report), text)


@app.command(name="audit")
def audit_command(service: Service = None, as_json: JsonOpt = False) -> None:
    """Check that archive and hot log together are the service's history: digests,
    bounds, SUID order with nothing twice, and archived events still in the log
    byte-identical."""
    with reported(as_json):
        if service is None:
            raise ValidationError("dcb archive audit needs --service")
        settings = DcbSettings()
        report = audit(settings, open_archive(settings), service)
    emit(
        as_json,
        asdict(report),
        lambda: console.print(
            f"{report.service}: audit passed: {report.archived_events} archived event(s) in "
            f"{report.segments} segment(s), {report.log_events} more in the log, "
            f"{report.overlap_checked} archived event(s) still in the log compared byte for byte"
        ),
    )
