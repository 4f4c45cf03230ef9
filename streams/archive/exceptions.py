"""What the history archive refuses; nothing is written when any of these is raised."""

from __future__ import annotations

from streams.errors import DcbError


class ArchiveError(DcbError):
    """Base of the archive's errors."""

    code = "archive_error"


class ArchiveSegmentInvalidError(ArchiveError):
    """A segment's bounds are not SUIDs, are inverted, or its count or digest does not
    match its records."""

    code = "archive_segment_invalid"


class ArchiveKeyInvalidError(ArchiveError):
    """A key is empty, holds NUL, or is not well-formed Unicode."""

    code = "archive_key_invalid"


class ArchiveConflictError(ArchiveError):
    """A segment overlaps or rewinds what the key holds (and is no exact repeat of a held
    segment), or a replace-all found the key changed since its caller read it."""

    code = "archive_conflict"


class ArchiveIncarnationError(ArchiveError):
    """The key holds segments of another incarnation of the service (a service re-created
    under the same id): extending or replacing them would mix two histories."""

    code = "archive_incarnation"


class ArchiveDigestError(ArchiveError):
    """A stored segment's records no longer hash to the digest recorded with them."""

    code = "archive_digest"


class ArchiveCorruptError(ArchiveError):
    """The archive's own bookkeeping is damaged: a manifest that does not parse, a
    segment it names that is gone."""

    code = "archive_corrupt"


class ArchiveNotCertifiedError(ArchiveError):
    """An archive run asked for SUIDs above the service's certified prefix, where an
    event may still commit."""

    code = "archive_not_certified"


class ArchiveAuditError(ArchiveError):
    """The archive and the hot log together are not the service's history (a gap, an
    overlap, or bytes that differ)."""

    code = "archive_audit_failed"


class ArchiveUnavailableError(ArchiveError):
    """The archive's backend cannot be reached or used (a driver missing, a server down)."""

    code = "archive_unavailable"
