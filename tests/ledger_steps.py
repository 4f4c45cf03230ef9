"""What the ledger tests share: steps added up as the shell publishes them in one round."""

from __future__ import annotations

from streams.ledger.ledger import Step


def merge(total: Step, part: Step) -> Step:
    """``part``'s records appended to ``total``'s (the later certificate wins); ``total``."""
    total.allocations += part.allocations
    total.deliveries += part.deliveries
    total.events += part.events
    total.results += part.results
    total.completed += part.completed
    total.certificate = part.certificate or total.certificate
    return total
