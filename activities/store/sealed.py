"""Thread env at rest: the JSON column holds an AES-GCM envelope when keys are configured."""

from __future__ import annotations

import base64
import json
from typing import Any

from activities.crypto import CryptoKeyError, Keyring

# The envelope's only key; env names are user-chosen, so this one is reserved-looking.
ENVELOPE = "$weftEncrypted"


def seal_env(env: dict[str, Any], keyring: Keyring | None, *, thread_id: str) -> dict[str, Any]:
    """The column value for `env`: an envelope bound to the thread, or `env` without keys."""
    if keyring is None or not env:
        return env
    plaintext = json.dumps(env, separators=(",", ":")).encode()
    key_id, sealed = keyring.encrypt(plaintext, associated=thread_id.encode())
    return {ENVELOPE: {"keyId": key_id, "data": base64.b64encode(sealed).decode()}}


def open_env(column: dict[str, Any], keyring: Keyring | None, *, thread_id: str) -> dict[str, Any]:
    """The env a column value holds; an envelope needs the key it was sealed with."""
    envelope = column.get(ENVELOPE) if len(column) == 1 else None
    if not isinstance(envelope, dict):
        return column
    if keyring is None:
        raise CryptoKeyError(
            f"thread {thread_id}: its env is encrypted with key {envelope.get('keyId')!r}, "
            "but no keys are configured; set WEFT_CODEC_KEYS"
        )
    sealed = base64.b64decode(envelope["data"])
    plaintext = keyring.decrypt(str(envelope["keyId"]), sealed, associated=thread_id.encode())
    opened: dict[str, Any] = json.loads(plaintext)
    return opened
