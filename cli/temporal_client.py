"""The Temporal client every `weft` command connects with, from the configuration."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client, Interceptor

from weft.transport.connection import connect
from weft.workers.config import WeftConfig
from weft.workers.secrets import load_keyring


async def client_from_config(
    config: WeftConfig, *, interceptors: Sequence[Interceptor] = ()
) -> Client:
    """Connect to the configured Temporal with weft's data converter (and its codec keys),
    and `interceptors` (tracing, for `weft serve`)."""
    temporal = config.temporal
    try:
        return await _connect(config, interceptors)
    except RuntimeError as err:  # the SDK's "Failed client connect: …"
        raise RuntimeError(f"cannot reach Temporal at {temporal.address} ({err})") from err


async def _connect(config: WeftConfig, interceptors: Sequence[Interceptor]) -> Client:
    temporal = config.temporal
    return await connect(
        temporal.address,
        namespace=temporal.namespace,
        api_key=temporal.api_key,
        tls=temporal.tls,
        keyring=load_keyring(config),
        encrypt=config.codec.encrypt,
        interceptors=interceptors,
    )
