"""Sealing a payload under its subject's key, and opening it (pure, AES-GCM).

An event that carries a subject tag (a tag with the configured prefix, ``user:`` say) has
its payload sealed before it leaves the writer: the log, the archive and every copy hold
only ciphertext, so destroying the subject's key (``dcb erase``) makes the payload
unreadable everywhere at once, while digests over the stored bytes still verify. The
sealed form is JSON, so a payload stays JSON text::

    {"$sealed": 1, "subject": "user:42", "nonce": "<base64>", "data": "<base64>"}

The subject and the event id are bound into the seal (associated data): a sealed payload
copied onto another event does not open there.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from streams.erasure.exceptions import SealedPayloadCorruptError

SEALED = "$sealed"
SHREDDED = "PAYLOAD_SHREDDED"
KEY_BYTES = 32
_NONCE_BYTES = 12


def new_key() -> bytes:
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


def subject_of(tags: Iterable[str], prefix: str) -> str | None:
    """The event's subject: its first tag (in sorted order) with ``prefix``."""
    return next((t for t in sorted(tags) if t.startswith(prefix)), None)


def _bound(subject: str, event_id: str) -> bytes:
    return json.dumps([subject, event_id]).encode()


def seal(payload: str, subject: str, event_id: str, key: bytes) -> str:
    nonce = os.urandom(_NONCE_BYTES)
    data = AESGCM(key).encrypt(nonce, payload.encode(), _bound(subject, event_id))
    return json.dumps(
        {
            SEALED: 1,
            "subject": subject,
            "nonce": base64.b64encode(nonce).decode(),
            "data": base64.b64encode(data).decode(),
        }
    )


def _sealed_form(payload: str) -> tuple[str, dict[str, Any]] | None:
    """The subject and the parsed sealed form, or ``None`` for a payload in the clear."""
    if not payload.startswith("{") or SEALED not in payload:
        return None
    try:
        parsed: Any = json.loads(payload)
    except ValueError:
        return None
    if isinstance(parsed, dict) and parsed.get(SEALED) == 1:
        subject = parsed.get("subject")
        return (subject, parsed) if isinstance(subject, str) else None
    return None


def sealed_subject(payload: str) -> str | None:
    """The subject a payload is sealed under, or ``None`` for a payload in the clear."""
    form = _sealed_form(payload)
    return None if form is None else form[0]


def shredded(subject: str) -> str:
    """What a reader gets for a payload whose subject was erased."""
    return json.dumps({SHREDDED: True, "subject": subject})


def open_payload(payload: str, event_id: str, key_of: Callable[[str], bytes | None]) -> str:
    """The payload in the clear: as it is if not sealed (``key_of`` is not asked), the
    shredded marker if its subject's key is gone (``key_of`` gives None);
    :class:`SealedPayloadCorruptError` if altered."""
    form = _sealed_form(payload)
    if form is None:
        return payload
    subject, sealed = form
    key = key_of(subject)
    if key is None:
        return shredded(subject)
    try:
        nonce = base64.b64decode(sealed["nonce"], validate=True)
        data = base64.b64decode(sealed["data"], validate=True)
        return AESGCM(key).decrypt(nonce, data, _bound(subject, event_id)).decode()
    except (InvalidTag, ValueError, KeyError, TypeError) as exc:
        raise SealedPayloadCorruptError(
            f"the payload of event {event_id} (subject {subject}) does not open: altered",
            event_id=event_id,
            subject=subject,
        ) from exc
