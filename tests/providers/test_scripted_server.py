"""The scripted model server itself: script validation, control endpoints, hosting modes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from providers_support import AddScript
from temporalio.exceptions import ApplicationError

from weft.activities.providers import AnthropicMessagesProvider, ChatRequest, OpenAIChatProvider
from weft.workers.scripted_model import (
    ScriptedModelServer,
    ScriptError,
    load_script_file,
    start_in_thread,
)

YAML_SCRIPT = """
scripts:
  greeter:
    turns:
      - match: "regex:^(hi|hello)"
        replies:
          - text: "Hello! Checking."
          - tool_calls: [{name: lookup, arguments: {q: x}}]
      - match: "*"
        replies:
          - text: "Pardon?"
"""


def test_bad_script_names_script_and_field() -> None:
    """A script failing validation raises ScriptError naming the script and the field."""
    with pytest.raises(ScriptError) as failed:
        ScriptedModelServer({"broken": {"replies": [{"text": "x", "chunk_size": 0}]}})
    assert "'broken'" in str(failed.value) and "replies.0.chunk_size" in str(failed.value)
    with pytest.raises(ScriptError, match="invalid regex"):
        ScriptedModelServer({"rx": {"turns": [{"match": "regex:(", "replies": [{"text": "x"}]}]}})
    with pytest.raises(ScriptError, match="tool_calls.0.name"):
        ScriptedModelServer({"tc": {"replies": [{"tool_calls": [{"arguments": {}}]}]}})


def test_unknown_reply_field_is_rejected() -> None:
    """A misspelt field is an error, not silently ignored."""
    with pytest.raises(ScriptError, match="delay_msec"):
        ScriptedModelServer({"typo": {"replies": [{"text": "x", "delay_msec": 5}]}})


async def test_yaml_scripts(tmp_path: Path, client: httpx.AsyncClient) -> None:
    """Scripts load from YAML and turns select by regex on the last user message."""
    path = tmp_path / "scripts.yaml"
    path.write_text(YAML_SCRIPT)
    async with ScriptedModelServer(load_script_file(path)) as server:
        provider = OpenAIChatProvider(client, base_url=server.openai_base_url, api_key=None)
        said: list[dict[str, Any]] = [{"role": "user", "content": "hello there"}]
        first = await provider.complete(ChatRequest(model="greeter", messages=said))
        said.append({"role": "assistant", "content": first.content})
        second = await provider.complete(ChatRequest(model="greeter", messages=said))
        other = await provider.complete(
            ChatRequest(model="greeter", messages=[{"role": "user", "content": "what"}])
        )
    assert first.content == "Hello! Checking."
    assert second.tool_calls[0].function.name == "lookup"
    assert other.content == "Pardon?"


async def test_exhausted_script_and_unmatched_turn(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Running past the last reply or matching no turn is a non-retryable 400 saying so."""
    model = add_script({"turns": [{"match": "only this", "replies": [{"text": "x"}]}]})
    with pytest.raises(ApplicationError, match="no turn of script") as unmatched:
        await openai.complete(ChatRequest(model=model, messages=[{"role": "user", "content": "?"}]))
    assert unmatched.value.non_retryable
    messages = [{"role": "user", "content": "only this"}, {"role": "assistant", "content": "x"}]
    with pytest.raises(ApplicationError, match="has no reply #1"):
        await openai.complete(ChatRequest(model=model, messages=messages))


async def test_control_endpoints(server: ScriptedModelServer, client: httpx.AsyncClient) -> None:
    """PUT /_scripts adds a script, GET /_requests lists requests, DELETE clears them."""
    url = server.base_url
    bad = await client.put(f"{url}/_scripts/put-bad", json={"replies": [{"repeat": 0}]})
    assert bad.status_code == 400 and "put-bad" in bad.json()["error"]["message"]
    ok = await client.put(f"{url}/_scripts/put-ok", json={"replies": [{"text": "via put"}]})
    assert ok.status_code == 200
    body = {"model": "put-ok", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    reply = await client.post(f"{server.openai_base_url}/chat/completions", json=body)
    assert reply.json()["choices"][0]["message"]["content"] == "via put"
    listed = (await client.get(f"{url}/_requests")).json()
    mine = [r for r in listed if r["model"] == "put-ok"]
    assert mine[-1]["status"] == 200 and mine[-1]["messages"] == body["messages"]
    assert (await client.delete(f"{url}/_requests")).status_code == 200
    assert (await client.get(f"{url}/_requests")).json() == []


async def test_faults_are_per_conversation(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """`times` counts per conversation: each of 100 conversations fails once, then succeeds."""
    model = add_script({"replies": [{"text": "ok", "error": {"status": 503}, "times": 1}]})

    async def attempt(n: int) -> str:
        request = ChatRequest(model=model, messages=[{"role": "user", "content": f"c{n}"}])
        try:
            await openai.complete(request)
        except ApplicationError as error:
            assert not error.non_retryable
            return (await openai.complete(request)).content or ""
        return "no failure"

    assert await asyncio.gather(*(attempt(n) for n in range(100))) == ["ok"] * 100


async def test_delays_are_honoured(openai: OpenAIChatProvider, add_script: AddScript) -> None:
    """delay_ms and chunk_delay_ms slow the reply down as scripted."""
    model = add_script(
        {"replies": [{"text": "abcdefgh" * 3, "delay_ms": 50, "chunk_delay_ms": 20}]}
    )
    started = time.perf_counter()
    await openai.complete(ChatRequest(model=model, messages=[{"role": "user", "content": "x"}]))
    assert time.perf_counter() - started >= 0.05 + 0.04


async def test_keep_alive_reuses_one_connection(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """Sequential streamed completions reuse one kept-alive connection."""
    model = add_script({"replies": [{"text": "short reply"}]})
    request = ChatRequest(model=model, messages=[{"role": "user", "content": "ping"}])
    await openai.complete(request)
    accepted = server.connections_accepted
    for _ in range(200):
        await openai.complete(request)
    assert server.connections_accepted == accepted  # the adapter kept its connection


async def test_anthropic_stream_keeps_connection(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """The Anthropic adapter reads each stream to its end, so its connection is reused."""
    model = add_script({"replies": [{"text": "short reply"}]})
    request = ChatRequest(model=model, messages=[{"role": "user", "content": "ping"}])
    await anthropic.complete(request)
    accepted = server.connections_accepted
    for _ in range(20):
        await anthropic.complete(request)
    assert server.connections_accepted == accepted


def test_thread_hosted_server() -> None:
    """start_in_thread serves synchronous callers until stop()."""
    handle = start_in_thread({"sync": {"replies": [{"text": "from a thread"}]}})
    try:
        body = {"model": "sync", "messages": [{"role": "user", "content": "hi"}], "stream": False}
        with httpx.Client() as client:
            reply = client.post(f"{handle.openai_base_url}/chat/completions", json=body)
        assert reply.json()["choices"][0]["message"]["content"] == "from a thread"
        assert handle.requests[-1]["model"] == "sync"
    finally:
        handle.stop()
    with pytest.raises(httpx.ConnectError), httpx.Client() as client:
        client.get(f"{handle.base_url}/_requests")


def test_standalone_runner(tmp_path: Path) -> None:
    """`python -m weft.workers.scripted_model --script FILE` serves the file's scripts."""
    path = tmp_path / "scripts.yaml"
    path.write_text(YAML_SCRIPT)
    command = [sys.executable, "-m", "weft.workers.scripted_model", "--script", str(path)]
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            base = first.split("OpenAI ")[1].strip()
            body = {
                "model": "greeter",
                "messages": [{"role": "user", "content": "x"}],
                "stream": False,
            }
            with httpx.Client() as client:
                reply = client.post(f"{base}/chat/completions", json=body)
            assert reply.json()["choices"][0]["message"]["content"] == "Pardon?"
        finally:
            process.terminate()
            process.wait(timeout=10)
            assert process.stdout is not None
            process.stdout.close()


def test_example_scripts_are_valid() -> None:
    """The example script file shipped with the server loads and validates."""
    path = Path(__file__).resolve().parents[2] / "workers/scripted_model/example_scripts.yaml"
    scripts = load_script_file(path)
    assert {"demo", "flaky", "tool-loop"} <= set(scripts)
    ScriptedModelServer(scripts)
