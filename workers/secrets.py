"""The configured encryption keys: read from WEFT_CODEC_KEYS or the keys file, made for dev."""

from __future__ import annotations

import os
from pathlib import Path

from weft.activities.crypto import CryptoKeyError, Keyring, new_key, parse_keys, split_entries
from weft.workers.config import ConfigError, WeftConfig


def load_keyring(config: WeftConfig) -> Keyring | None:
    """The keyring of `config`, or None when no key is configured (nothing is encrypted).

    `codec.keys` (WEFT_CODEC_KEYS) wins over `codec.keysFile`; a missing keys file means
    no keys. A malformed key is a ConfigError naming where it came from.
    """
    codec = config.codec
    try:
        if codec.keys:
            return parse_keys(split_entries(codec.keys), source="WEFT_CODEC_KEYS")
        if codec.keys_file:
            path = config.path(codec.keys_file)
            if path.exists():
                return parse_keys(path.read_text(encoding="utf-8").splitlines(), source=str(path))
    except CryptoKeyError as err:
        raise ConfigError(str(err)) from None
    return None


def ensure_dev_keys(config: WeftConfig) -> Keyring:
    """The configured keyring, or a new key written to the keys file (`weft dev` only)."""
    keyring = load_keyring(config)
    if keyring is not None:
        return keyring
    if not config.codec.keys_file:
        raise ConfigError("codec.keysFile: set it (or WEFT_CODEC_KEYS) to encrypt secrets")
    path = config.path(config.codec.keys_file)
    write_key_file(path, f"dev-1:{new_key()}")
    keyring = load_keyring(config)
    assert keyring is not None  # just written
    return keyring


def write_key_file(path: Path, entry: str) -> None:
    """Create a keys file readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(
            "# weft encryption keys (id:base64key); the first one encrypts, all decrypt.\n"
            f"{entry}\n"
        )


__all__ = ["ensure_dev_keys", "load_keyring", "write_key_file"]
