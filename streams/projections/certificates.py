"""Whether a projection may trust a closed-prefix certificate.

A certificate is the only thing that lets a projection move: it says every event of the
service at or below its prefix is settled and lies below its coverage offsets. One that is
foreign (another service, another allocator lineage), not ready, malformed or behind the
prefix already trusted is ignored, with the reason, and never advances anything.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from streams.errors import InvalidSuidError
from streams.model.records import Certificate
from streams.model.suid import parse_suid

CERTIFICATE_VERSION = 1


class Verdict(StrEnum):
    ACCEPTED = "accepted"
    UNCHANGED = "unchanged"  # the prefix already trusted: nothing new, nothing wrong
    FOREIGN_SERVICE = "foreign_service"
    FOREIGN_LINEAGE = "foreign_lineage"
    NOT_READY = "not_ready"
    MALFORMED = "malformed"
    BACKWARDS = "backwards"


class Trusted(BaseModel):
    """What a projection keeps of the newest certificate it validated."""

    model_config = ConfigDict(frozen=True)

    lineage: str
    prefix: str
    coverage: dict[int, int]  # dcb.events partition -> exclusive end offset
    generated_at: float = 0.0  # epoch seconds


def judge(
    certificate: Certificate, key_service: str, trusted: Trusted | None, lineage: str | None
) -> Verdict:
    """The verdict on ``certificate``, read under record key ``key_service``, for a
    projection that trusts ``trusted`` and expects allocator ``lineage``."""
    if certificate.service_id != key_service:
        return Verdict.FOREIGN_SERVICE
    if not _well_formed(certificate):
        return Verdict.MALFORMED
    if certificate.status != "READY":
        return Verdict.NOT_READY
    if lineage is not None and certificate.allocator_lineage_id != lineage:
        return Verdict.FOREIGN_LINEAGE
    if certificate.closed_prefix_suid is None:
        return Verdict.UNCHANGED if trusted is None else Verdict.BACKWARDS
    if trusted is not None:
        if certificate.closed_prefix_suid < trusted.prefix:
            return Verdict.BACKWARDS
        if certificate.closed_prefix_suid == trusted.prefix:
            return Verdict.UNCHANGED
    return Verdict.ACCEPTED


def trusted_from(certificate: Certificate) -> Trusted:
    """What to keep of an ACCEPTED certificate."""
    assert certificate.closed_prefix_suid is not None
    return Trusted(
        lineage=certificate.allocator_lineage_id,
        prefix=certificate.closed_prefix_suid,
        coverage={c.partition: c.offset for c in certificate.coverage},
        generated_at=certificate.generated_at.timestamp(),
    )


def _well_formed(certificate: Certificate) -> bool:
    if certificate.certificate_version != CERTIFICATE_VERSION:
        return False
    if certificate.unresolved_count < 0 or not certificate.allocator_lineage_id:
        return False
    partitions = [c.partition for c in certificate.coverage]
    if len(set(partitions)) != len(partitions):
        return False
    if any(c.partition < 0 or c.offset < 0 for c in certificate.coverage):
        return False
    if certificate.closed_prefix_suid is not None:
        try:
            parse_suid(certificate.closed_prefix_suid)
        except InvalidSuidError:
            return False
    return True
