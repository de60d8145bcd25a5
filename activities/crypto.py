"""AES-256-GCM with named keys: one active key encrypts, every configured key decrypts.

Shared by the Temporal payload codec (`client/codec.py`), the store (env at rest) and the
codec server. Key ids travel with the ciphertext, so keys can be rotated: add a new active
key, keep the old ones until nothing encrypted with them remains.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterable, Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class CryptoKeyError(ValueError):
    """A key is malformed, missing, or does not open the ciphertext; the message says which."""


class Keyring:
    """Named 256-bit keys; `active` names the one that encrypts."""

    def __init__(self, keys: Mapping[str, bytes], *, active: str) -> None:
        if not keys:
            raise CryptoKeyError("no encryption keys are configured")
        for key_id, key in keys.items():
            if not _KEY_ID.match(key_id):
                raise CryptoKeyError(
                    f"key id {key_id!r} must be 1-64 letters, digits, '.', '_' or '-'"
                )
            if len(key) != KEY_BYTES:
                raise CryptoKeyError(f"key {key_id!r} must be {KEY_BYTES} bytes, not {len(key)}")
        if active not in keys:
            raise CryptoKeyError(f"the active key {active!r} is not among the keys")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.active = active

    @property
    def key_ids(self) -> list[str]:
        """Every configured key id, the active one first."""
        return [self.active, *(k for k in self._ciphers if k != self.active)]

    def encrypt(self, plaintext: bytes, *, associated: bytes = b"") -> tuple[str, bytes]:
        """Encrypt with the active key: (key id, nonce + ciphertext + tag)."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.active].encrypt(nonce, plaintext, associated or None)
        return self.active, nonce + sealed

    def decrypt(self, key_id: str, sealed: bytes, *, associated: bytes = b"") -> bytes:
        """Decrypt what `encrypt` returned; a clear error names a missing or wrong key."""
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CryptoKeyError(
                f"data was encrypted with key {key_id!r}, which is not configured "
                f"(configured: {', '.join(self.key_ids)}); add it to WEFT_CODEC_KEYS"
            )
        try:
            return cipher.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], associated or None)
        except InvalidTag:
            raise CryptoKeyError(
                f"key {key_id!r} does not open this data: the key is wrong or the data was altered"
            ) from None


def new_key() -> str:
    """A fresh random key, base64url-encoded (what `parse_keys` reads)."""
    return base64.urlsafe_b64encode(os.urandom(KEY_BYTES)).decode()


def parse_keys(lines: Iterable[str], *, source: str) -> Keyring:
    """Read `id:base64key` entries (newline- or comma-separated); the first one is active.

    Blank entries and `#` comments are skipped. Errors name `source` and the entry.
    """
    keys: dict[str, bytes] = {}
    for number, raw in enumerate(lines, start=1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        key_id = key_id.strip()
        if not sep or not key_id:
            raise CryptoKeyError(f"{source}: entry {number}: expected 'id:base64key'")
        try:
            standard = encoded.strip().replace("-", "+").replace("_", "/")
            key = base64.b64decode(_pad(standard), validate=True)
        except (binascii.Error, ValueError):
            raise CryptoKeyError(f"{source}: key {key_id!r} is not valid base64") from None
        if key_id in keys:
            raise CryptoKeyError(f"{source}: key id {key_id!r} appears twice")
        keys[key_id] = key
    if not keys:
        raise CryptoKeyError(f"{source}: no keys (expected 'id:base64key' entries)")
    try:
        return Keyring(keys, active=next(iter(keys)))
    except CryptoKeyError as err:
        raise CryptoKeyError(f"{source}: {err}") from None


def split_entries(text: str) -> list[str]:
    """Entries of a key list given as one string (newlines or commas)."""
    return re.split(r"[,\n]", text)


def _pad(encoded: str) -> str:
    return encoded + "=" * (-len(encoded) % 4)


__all__ = ["CryptoKeyError", "Keyring", "new_key", "parse_keys", "split_entries"]
