"""JSON columns at rest: an AES-GCM envelope instead of the value when keys are configured.

Used for the thread row's env and for definition snapshots that carry env. Each envelope is
bound to its row's id, so a sealed value copied to another row does not open.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from weft.activities.crypto import CryptoKeyError, Keyring

# The envelope's only key; env names are user-chosen, so this one is reserved-looking.
ENVELOPE = "$weftEncrypted"


def seal(value: dict[str, Any], keyring: Keyring | None, *, bound_to: str) -> dict[str, Any]:
    """The column value for `value`: an envelope bound to `bound_to`, or `value` without keys."""
    if keyring is None or not value:
        return value
    plaintext = json.dumps(value, separators=(",", ":")).encode()
    key_id, sealed = keyring.encrypt(plaintext, associated=bound_to.encode())
    return {ENVELOPE: {"keyId": key_id, "data": base64.b64encode(sealed).decode()}}


def unseal(column: dict[str, Any], keyring: Keyring | None, *, bound_to: str) -> dict[str, Any]:
    """The value a column holds; an envelope needs the key it was sealed with."""
    envelope = column.get(ENVELOPE) if len(column) == 1 else None
    if not isinstance(envelope, dict):
        return column
    if keyring is None:
        raise CryptoKeyError(
            f"{bound_to}: stored encrypted with key {envelope.get('keyId')!r}, "
            "but no keys are configured; set WEFT_CODEC_KEYS"
        )
    sealed = base64.b64decode(envelope["data"])
    plaintext = keyring.decrypt(str(envelope["keyId"]), sealed, associated=bound_to.encode())
    opened: dict[str, Any] = json.loads(plaintext)
    return opened
