"""`weft.connect`: a Temporal client with weft's data converter and payload codec."""

from __future__ import annotations

import os
from typing import Literal

from opentelemetry.sdk.trace import TracerProvider
from temporalio.client import Client

from weft._config import DEFAULT_ADDRESS, codec_config, root_of
from weft.activities.crypto import Keyring
from weft.transport.connection import connect as connect_transport
from weft.workers.config import WeftConfig
from weft.workers.secrets import load_keyring
from weft.workers.telemetry import tracing_interceptor


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    *,
    keys: Keyring | str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    api_key: str | None = None,
    tls: bool = False,
    encrypt: Literal["secrets", "all"] = "secrets",
    tracer_provider: TracerProvider | None = None,
) -> Client:
    """Connect to Temporal the way every weft worker does.

    `address` defaults to `$WEFT_TEMPORAL_ADDRESS`, else `localhost:7233`; `namespace` to
    `$WEFT_NAMESPACE`, else `default`. The client's data converter is weft's: pydantic JSON
    with camelCase fields, which the workflow expects. A plain `Client.connect` uses
    Temporal's default converter: weft's client helpers then warn, and the payloads are
    snake_case JSON (docs/python-api.md).

    Encryption: with keys, payloads that carry env (the start input's `env`) are
    AES-GCM encrypted in Temporal history (`encrypt="all"` encrypts every payload). The
    keys are `keys` (a `Keyring`, a str of `id:base64key,...` entries, or the path of a
    keys file), else `$WEFT_CODEC_KEYS`, else the file `.weft/codec.keys` under `root`
    (the current directory by default) when it exists. Without any, nothing is encrypted.
    A worker finds its keys by the same rule: give both the same keys.

    Tracing: with a `tracer_provider`, the client carries Temporal's tracing interceptor,
    so a thread it starts joins the caller's current trace (docs/observability.md).
    """
    if isinstance(keys, Keyring):
        keyring: Keyring | None = keys
    else:
        config = WeftConfig(root=root_of(root), codec=codec_config(keys, os.environ))
        keyring = load_keyring(config)
    return await connect_transport(
        address or os.environ.get("WEFT_TEMPORAL_ADDRESS") or DEFAULT_ADDRESS,
        namespace=namespace or os.environ.get("WEFT_NAMESPACE") or "default",
        api_key=api_key,
        tls=tls,
        keyring=keyring,
        encrypt=encrypt,
        interceptors=[tracing_interceptor(tracer_provider)] if tracer_provider else [],
    )
