"""The RECONCILE command an operator (or the SDK) sends to ask a ledger for a pass now.

The worker's own clock runs reconcile passes by itself (``LedgerProcessor.tick``); this
command is for ``dcb reconcile --now``: a pass that also skips the grace window.
"""

from __future__ import annotations

from streams.model.records import Command, ReconcileRequest


def reconcile_command(service_id: str, skip_grace: bool, requested_by: str) -> Command:
    request = ReconcileRequest(skip_grace=skip_grace, requested_by=requested_by)
    return Command.of_request(service_id, request)
