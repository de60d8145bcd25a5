"""Connecting to Temporal with weft's data converter."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client, Interceptor

from weft.activities.crypto import Keyring
from weft.transport.codec import EncryptMode, data_converter


async def connect(
    address: str,
    *,
    namespace: str = "default",
    api_key: str | None = None,
    tls: bool = False,
    keyring: Keyring | None = None,
    encrypt: EncryptMode = "secrets",
    interceptors: Sequence[Interceptor] = (),
) -> Client:
    """A Temporal client that speaks pydantic JSON, as every weft worker does.

    With a `keyring`, payloads that carry env are encrypted (see `transport/codec.py`).
    `interceptors` (tracing, say) apply to the client's calls and to workers built on it.
    """
    return await Client.connect(
        address,
        namespace=namespace,
        api_key=api_key,
        tls=tls or bool(api_key),
        data_converter=data_converter(keyring, encrypt=encrypt),
        interceptors=interceptors,
    )


def with_keyring(client: Client, keyring: Keyring, *, encrypt: EncryptMode = "secrets") -> Client:
    """The same connection, with the encrypting data converter."""
    config = client.config()
    config["data_converter"] = data_converter(keyring, encrypt=encrypt)
    return Client(**config)
