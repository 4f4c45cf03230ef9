"""``dcb erase``: crypto-shredding of one subject."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict
from typing import Annotated

import typer

from streams.cli.output import console, emit, reported
from streams.erasure import open_key_store
from streams.erasure.erase import erase as erase_subject
from streams.settings import DcbSettings


def erase(
    subject: Annotated[str, typer.Option("--subject", help="The subject tag, e.g. user:42.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Destroy a subject's key: every payload sealed under it, wherever it is stored,
    reads as PAYLOAD_SHREDDED from now on. Idempotent; reports what became unreadable."""
    with reported(as_json):
        settings = DcbSettings()
        with nullcontext() if as_json else console.status(f"erasing {subject}..."):
            report = erase_subject(settings, open_key_store(settings), subject)
    emit(
        as_json,
        asdict(report),
        lambda: console.print(
            f"{report.subject}: key {'destroyed' if report.key_destroyed else 'already gone'}; "
            f"{report.unreadable_events} event(s) are now unreadable ({report.archived_events} "
            "of them in the archive)"
            + (f" (services: {', '.join(report.services)})" if report.services else "")
        ),
    )
