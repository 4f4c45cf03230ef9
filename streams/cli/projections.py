"""``dcb projections lag / watch``: how far behind each projection is, read from Kafka."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from streams.cli.output import console, emit, reported
from streams.projections.exceptions import UnknownProjectionError
from streams.projections.lag import ProjectionLag
from streams.settings import DcbSettings

app = typer.Typer(help="How far behind the projections are (checkpoint vs dcb.events).")

ProjectionOpt = Annotated[
    str | None, typer.Option("--projection", "-p", help="Only this projection.")
]


def _lags(projection: str | None) -> list[ProjectionLag]:
    from streams.projections.lag_reader import checkpoints, read_lag

    settings = DcbSettings()
    found = checkpoints(settings)
    if projection is not None:
        if projection not in found:
            raise UnknownProjectionError(
                f"no checkpoint of projection {projection!r} (known: {', '.join(found) or 'none'})",
                projection_id=projection,
            )
        found = {projection: found[projection]}
    return [read_lag(settings, c) for _, c in sorted(found.items())]


def _table(lags: list[ProjectionLag]) -> Table:
    table = Table("projection", "service", "checkpoint SUID", "head SUID", "behind")
    table.add_column("lag bound / SafeWindow")
    for lag in lags:
        window = f"{lag.lag_bound_s:.1f} s / {lag.safe_window_s:.1f} s"
        if lag.indeterminate:
            window += " (indeterminate)"
        for n, s in enumerate(lag.services or []):
            table.add_row(
                lag.projection_id if n == 0 else "",
                s.service_id,
                s.checkpoint_suid or "-",
                s.head_suid or "-",
                str(s.events_behind),
                window if n == 0 else "",
            )
        if not lag.services:
            table.add_row(lag.projection_id, "-", "-", "-", "0", window)
    return table


@app.command()
def lag(
    projection: ProjectionOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Per projection and service: the SUID applied through, the newest SUID on
    dcb.events, the events between, and the SafeWindow lag bound."""
    with reported(as_json):
        lags = _lags(projection)
    emit(as_json, [x.model_dump() for x in lags], lambda: console.print(_table(lags)))


@app.command()
def watch(
    projection: ProjectionOpt = None,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes.")] = 1.0,
) -> None:
    """The lag table, refreshed until Ctrl-C."""
    with reported(False), Live(_table(_lags(projection)), console=console) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(_table(_lags(projection)))
        except KeyboardInterrupt:
            pass
