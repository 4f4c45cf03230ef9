"""Errors of projections, each with a stable ``code``."""

from __future__ import annotations

from streams.errors import DcbError, StaleFenceError


class ProjectionError(DcbError):
    code = "projection_error"


class InvalidProjectionIdError(ProjectionError):
    """An id must be usable in a topic name: it names the projection's row topic."""

    code = "invalid_projection_id"


class DuplicateProjectionError(ProjectionError):
    code = "duplicate_projection_id"


class UnknownProjectionError(ProjectionError):
    code = "unknown_projection"


class RegistryLoadError(ProjectionError):
    """``--app module:attribute`` did not name a projector registry."""

    code = "projection_registry_not_found"


class ProjectionFencedError(ProjectionError, StaleFenceError):
    """A newer runner (or a rebuild) of the same projection took over: this one stops.
    It is the one fencing error (:class:`~streams.errors.StaleFenceError`)."""

    code = StaleFenceError.code


class CorruptCheckpointError(ProjectionError):
    code = "corrupt_projection_checkpoint"


class ProjectionResetError(ProjectionError):
    """Another writer (a rebuild) wrote the projection's checkpoint: restore from it."""

    code = "projection_reset"


class HistoryTruncatedError(ProjectionError):
    """``dcb.events`` no longer holds events the projection has still to apply, and the
    archive does not hold them either."""

    code = "projection_history_truncated"


class LogDroppedError(ProjectionError):
    """The log dropped records below the runner's position while it ran (retention):
    restoring from the checkpoint then reads them from the archive."""

    code = "projection_log_dropped"
