"""Builds the model providers a worker serves, from config."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from weft.activities.providers import AnthropicMessagesProvider, ChatProvider, OpenAIChatProvider
from weft.activities.providers.rate_limited import RateLimitedProvider
from weft.activities.providers.traced import TracedProvider
from weft.activities.rate_limits import RateLimiter
from weft.activities.spans import Spans
from weft.workers.config import ProviderConfig, WeftConfig
from weft.workers.scripted_model import ScriptedModelServer, load_script_file


def load_scripts(folder: Path) -> dict[str, Any]:
    """Every script in the YAML files of `folder`, by name."""
    scripts: dict[str, Any] = {}
    for path in sorted(folder.glob("*.y*ml")):
        scripts.update(load_script_file(path))
    return scripts


async def build_providers(
    config: WeftConfig,
    stack: AsyncExitStack,
    *,
    scripted: ScriptedModelServer | None = None,
    spans: Spans | None = None,
    limiter: RateLimiter | None = None,
) -> dict[str, ChatProvider]:
    """One provider per configured entry, sharing one pooled httpx client.

    A `scripted` provider gets the `scripted` server passed in, or starts its own on
    loopback with the configured scripts; it lives as long as `stack`. With tracing
    `spans`, each provider is wrapped in a span per completion. With a `limiter`, a
    provider whose entry sets `rateLimit` admits each request under it.
    """
    # Provider retries are off by construction: httpx never retries, Temporal does.
    http = await stack.enter_async_context(
        httpx.AsyncClient(
            timeout=httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=30.0),
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )
    )
    providers: dict[str, ChatProvider] = {}
    for name, entry in config.providers.items():
        provider = await _build(name, entry, config, http, stack, scripted)
        if spans is not None and spans.enabled:
            provider = TracedProvider(provider, provider_name=name, system=entry.kind, spans=spans)
        if entry.rate_limit is not None:
            if limiter is None:
                raise ValueError(f"provider {name!r}: rateLimit needs the store's limiter")
            provider = RateLimitedProvider(
                provider, limiter=limiter, key=entry.limit_key(name), limit=entry.rate_limit
            )
        providers[name] = provider
    return providers


async def _build(
    name: str,
    entry: ProviderConfig,
    config: WeftConfig,
    http: httpx.AsyncClient,
    stack: AsyncExitStack,
    scripted: ScriptedModelServer | None,
) -> ChatProvider:
    if entry.kind == "scripted":
        if scripted is None:
            scripts = load_scripts(config.path(entry.scripts)) if entry.scripts else {}
            scripted = await stack.enter_async_context(ScriptedModelServer(scripts))
        return OpenAIChatProvider(http, base_url=scripted.openai_base_url, api_key=None)
    if entry.base_url is None:
        raise ValueError(f"provider {name!r}: baseUrl is required for kind {entry.kind!r}")
    if entry.kind == "anthropic":
        return AnthropicMessagesProvider(http, base_url=entry.base_url, api_key=entry.api_key)
    return OpenAIChatProvider(http, base_url=entry.base_url, api_key=entry.api_key)
