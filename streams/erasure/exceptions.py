"""What crypto-shredding refuses."""

from __future__ import annotations

from streams.errors import DcbError


class ErasureError(DcbError):
    code = "erasure_error"


class SealedPayloadCorruptError(ErasureError):
    """A sealed payload does not open with its subject's key: it was altered (an erased
    subject reads as the shredded marker instead, never as this)."""

    code = "sealed_payload_corrupt"


class KeyStoreError(ErasureError):
    """The key store cannot be read or written."""

    code = "key_store_error"
