"""The history archive: where a service's events go before the hot log drops them."""

from streams.archive.api import ArchiveStore, KeyPage, Segment, SegmentHeader
from streams.archive.directory import DirectoryArchive
from streams.archive.memory import MemoryArchive

__all__ = [
    "ArchiveStore",
    "DirectoryArchive",
    "KeyPage",
    "MemoryArchive",
    "Segment",
    "SegmentHeader",
]
