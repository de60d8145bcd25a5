"""Fixtures for provider tests: one scripted model server per session, a client per test.

Each test registers its scripts under unique names, so tests share the server but not state.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from providers_support import AddScript

from weft.activities.providers import AnthropicMessagesProvider, OpenAIChatProvider
from weft.workers.scripted_model import ScriptedModelServer


@pytest.fixture(scope="session")
async def server() -> AsyncIterator[ScriptedModelServer]:
    """A scripted model server on a free loopback port."""
    async with ScriptedModelServer() as running:
        yield running


@pytest.fixture
def add_script(server: ScriptedModelServer) -> AddScript:
    """Register a script under a fresh unique name and return the name (the model)."""

    def add(script: dict[str, object]) -> str:
        name = f"script-{uuid.uuid4().hex[:8]}"
        server.set_script(name, script)
        return name

    return add


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    """A pooled httpx client, as a worker would inject it."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(10.0)) as running:
        yield running


@pytest.fixture
def openai(client: httpx.AsyncClient, server: ScriptedModelServer) -> OpenAIChatProvider:
    """The OpenAI adapter pointed at the scripted server."""
    return OpenAIChatProvider(client, base_url=server.openai_base_url, api_key="test-key")


@pytest.fixture
def anthropic(client: httpx.AsyncClient, server: ScriptedModelServer) -> AnthropicMessagesProvider:
    """The Anthropic adapter pointed at the scripted server."""
    return AnthropicMessagesProvider(client, base_url=server.anthropic_base_url, api_key="test-key")
