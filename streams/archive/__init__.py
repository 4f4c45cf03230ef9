"""The history archive: where a service's events go before the hot log drops them."""

from streams.archive.api import ArchiveStore, KeyPage, Segment, SegmentHeader
from streams.archive.directory import DirectoryArchive
from streams.archive.exceptions import ArchiveUnavailableError
from streams.archive.memory import MemoryArchive
from streams.settings import DcbSettings


def open_archive(settings: DcbSettings) -> ArchiveStore:
    """The archive the settings name (``DCB_ARCHIVE__BACKEND``)."""
    config = settings.archive
    if config.backend == "postgres":
        if not config.dsn:
            raise ArchiveUnavailableError("the postgres archive needs DCB_ARCHIVE__DSN")
        from streams.archive.postgres import PostgresArchive

        return PostgresArchive(config.dsn)
    return DirectoryArchive(config.folder(settings.broker.cache_dir))


__all__ = [
    "ArchiveStore",
    "DirectoryArchive",
    "KeyPage",
    "MemoryArchive",
    "Segment",
    "SegmentHeader",
    "open_archive",
]
