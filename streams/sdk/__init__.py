"""The client SDK: append with a DCB condition, read by query, the certificate."""

from streams.sdk.client import AppendResult, AsyncDcbClient, DcbClient
from streams.sdk.event_index import SequencedEvent

__all__ = ["AppendResult", "AsyncDcbClient", "DcbClient", "SequencedEvent"]
