"""The client SDK: append with a DCB condition, read by query, the certificate."""

from streams.sdk.client import AppendResult, AsyncDcbClient, DcbClient
from streams.sdk.event_index import SequencedEvent
from streams.sdk.events import Event, Query, ReadResult

__all__ = [
    "AppendResult",
    "AsyncDcbClient",
    "DcbClient",
    "Event",
    "Query",
    "ReadResult",
    "SequencedEvent",
]
