"""The payload codec that keeps env values encrypted in Temporal history.

The payload converter marks every payload whose value carries env (`env`, `scopedEnv`: a
thread's start input, `thread.init`'s input, anything that copies them); the codec encrypts
marked payloads (or all of them, with `encrypt="all"`) with AES-GCM. Decoding opens what it
encrypted and passes everything else through, so plain JSON from other services (the
`temporal` CLI, other SDKs) keeps working, and signals, queries and updates stay plain JSON.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

from weft.activities.crypto import Keyring
from weft.contract.thread_env import carries_env

EncryptMode = Literal["secrets", "all"]

ENCODING = b"binary/encrypted"
KEY_ID_HEADER = "encryption-key-id"
# Set by the payload converter on payloads that carry env; the codec encrypts those.
SECRET_MARK = "weft-secret"


class MarkingPayloadConverter(PydanticPayloadConverter):
    """weft's pydantic JSON converter, marking payloads that carry env for the codec."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        """Convert as usual, then mark the payloads whose value carries env."""
        payloads = super().to_payloads(values)
        for value, payload in zip(values, payloads, strict=True):
            if carries_env(value):
                payload.metadata[SECRET_MARK] = b"1"
        return payloads


class EncryptionCodec(PayloadCodec):
    """AES-GCM over whole payloads, with the key id in the metadata (keys can rotate)."""

    def __init__(self, keyring: Keyring, *, encrypt: EncryptMode = "secrets") -> None:
        self.keyring = keyring
        self.encrypt_all = encrypt == "all"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Encrypt marked payloads (all, in `all` mode); leave the rest as they are."""
        if not any(self._wants(p) for p in payloads):
            return list(payloads)
        # AES-GCM is fast, but a few MB should not stall the event loop.
        return await asyncio.to_thread(self.encode_sync, payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Decrypt weft-encrypted payloads; pass everything else through untouched."""
        if not any(is_encrypted(p) for p in payloads):
            return list(payloads)
        return await asyncio.to_thread(self.decode_sync, payloads)

    def encode_sync(self, payloads: Sequence[Payload], *, force: bool = False) -> list[Payload]:
        """`encode` without the event loop; `force` encrypts every payload not yet encrypted."""
        return [
            self._seal(p) if (force and not is_encrypted(p)) or self._wants(p) else p
            for p in payloads
        ]

    def decode_sync(self, payloads: Sequence[Payload]) -> list[Payload]:
        """`decode` without the event loop (the codec server calls this)."""
        return [self._open(p) if is_encrypted(p) else p for p in payloads]

    def _wants(self, payload: Payload) -> bool:
        if is_encrypted(payload):
            return False
        return self.encrypt_all or SECRET_MARK in payload.metadata

    def _seal(self, payload: Payload) -> Payload:
        key_id, sealed = self.keyring.encrypt(payload.SerializeToString())
        return Payload(metadata={"encoding": ENCODING, KEY_ID_HEADER: key_id.encode()}, data=sealed)

    def _open(self, payload: Payload) -> Payload:
        key_id = payload.metadata.get(KEY_ID_HEADER, b"").decode()
        opened = Payload()
        opened.ParseFromString(self.keyring.decrypt(key_id, payload.data))
        return opened


def is_encrypted(payload: Payload) -> bool:
    """Whether this codec produced `payload`."""
    return payload.metadata.get("encoding") == ENCODING


def data_converter(keyring: Keyring | None, *, encrypt: EncryptMode = "secrets") -> DataConverter:
    """weft's data converter: plain pydantic JSON without keys, encrypting env with them."""
    if keyring is None:
        return pydantic_data_converter
    return DataConverter(
        payload_converter_class=MarkingPayloadConverter,
        payload_codec=EncryptionCodec(keyring, encrypt=encrypt),
    )


__all__ = [
    "EncryptionCodec",
    "MarkingPayloadConverter",
    "carries_env",
    "data_converter",
    "is_encrypted",
]
