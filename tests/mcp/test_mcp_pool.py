"""The worker's MCP session pool against real MCP servers (stdio and streamable HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_support import (
    HttpMcpServer,
    free_port,
    http_server,
    http_server_def,
    server_children,
    stdio_server,
    wait_gone,
)

from weft.activities.mcp.pool import McpSessionPool
from weft.activities.mcp.types import McpUnavailable
from weft.contract.mcp import ElicitationAnswer, McpServerDef
from weft.contract.thread_env import EnvEntry

BABBLER = Path(__file__).resolve().parents[1] / "mcp_servers" / "babbler.py"

NO_ENV: dict[str, EnvEntry] = {}


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[McpSessionPool]:
    pool = McpSessionPool(root=tmp_path)
    try:
        yield pool
    finally:
        await pool.aclose()


@pytest.fixture
def http() -> Iterator[HttpMcpServer]:
    with http_server() as server:
        yield server


@contextlib.contextmanager
def serving(transport: str) -> Iterator[McpServerDef]:
    """The test server's definition over `transport` (an HTTP one runs for the block)."""
    if transport == "stdio":
        yield stdio_server()
        return
    with http_server() as running:
        yield http_server_def(running.url)


def env_of(**values: str) -> dict[str, EnvEntry]:
    return {name: EnvEntry(value=value) for name, value in values.items()}


async def call(pool: McpSessionPool, server: Any, tool: str, env: Any = NO_ENV, **kw: Any) -> Any:
    timeout = kw.pop("timeout", 10.0)
    elicit = kw.pop("elicit", None)
    return await pool.call_tool(server, env, tool, kw, timeout=timeout, elicit=elicit)


async def server_pid(pool: McpSessionPool, server: Any, env: Any = NO_ENV) -> int:
    reply = await call(pool, server, "pid", env)
    assert reply.result.status == "success", reply.result
    return int(reply.result.result)


def answering(answer: ElicitationAnswer) -> Any:
    async def handler(message: str, schema: dict[str, Any]) -> ElicitationAnswer:
        return answer

    return handler


# -- listing and calling ------------------------------------------------------------------


async def test_stdio_server_lists_and_calls(pool):
    """A stdio server's tools are listed raw and a call returns its text result."""
    server = stdio_server()
    listed = {tool.name: tool for tool in await pool.list_tools(server, NO_ENV)}
    assert {"add", "echo", "fail", "slow", "ask_name", "add_tool", "pid"} <= set(listed)
    assert listed["add"].input_schema["required"] == ["a", "b"]
    assert listed["add"].description == "Add two integers."
    reply = await call(pool, server, "add", a=2, b=3)
    assert reply.result.status == "success"
    assert reply.result.result == "5"
    assert reply.relisted is None


async def test_http_server_lists_and_calls(pool, http):
    """A streamable HTTP server's tools are listed and a call returns its text result."""
    server = http_server_def(http.url)
    names = [tool.name for tool in await pool.list_tools(server, NO_ENV)]
    assert "echo" in names
    reply = await call(pool, server, "echo", text='{"json": "stays text"}')
    assert reply.result.result == '{"json": "stays text"}'


async def test_a_tool_error_is_an_error_result(pool):
    """A tool that fails (isError) gives an error result with its text, code mcp_tool_error."""
    reply = await call(pool, stdio_server(), "fail", message="the disk is full")
    assert reply.result.status == "error"
    assert reply.result.error_code == "mcp_tool_error"
    assert "the disk is full" in reply.result.error


async def test_an_unknown_tool_is_an_mcp_error_result(pool):
    """A JSON-RPC error from the server (an unknown tool) is an error result, code mcp_error."""
    reply = await call(pool, stdio_server(), "no_such_tool")
    assert reply.result.status == "error"
    assert reply.result.error_code == "mcp_error"
    assert "Unknown tool: no_such_tool" in reply.result.error
    assert "'tools'" in reply.result.error


async def test_structured_content_and_binary_parts(pool):
    """Structured content is the result; image parts are placeholders, resources their text."""
    server = stdio_server()
    weather = await call(pool, server, "weather", city="Oslo")
    assert weather.result.result == {"city": "Oslo", "celsius": 21}
    picture = await call(pool, server, "picture")
    assert picture.result.result == [
        "a picture:",
        {"type": "image", "mimeType": "image/png", "bytes": 66},  # the 1x1 PNG
        "some notes",
    ]


async def test_a_malformed_schema_is_listed_raw(pool):
    """A tool's malformed inputSchema is returned as the server gave it (checks are the catalogue's)."""
    listed = await pool.list_tools(stdio_server(args=["--bad-schema"]), NO_ENV)
    assert next(tool for tool in listed if tool.name == "broken").input_schema == {"type": 5}


async def test_a_slow_tool_times_out_and_the_session_stays(pool):
    """A call past its timeout is a `timeout` error naming server, tool and seconds; the
    session goes on serving."""
    server = stdio_server()
    pid = await server_pid(pool, server)
    started = time.monotonic()
    reply = await call(pool, server, "slow", seconds=5, timeout=0.3)
    assert time.monotonic() - started < 2
    assert reply.result.error_code == "timeout"
    assert reply.result.error == "MCP server 'tools': tool 'slow' did not answer within 0.3 s"
    assert await server_pid(pool, server) == pid


async def _noted(note: Path, what: str = "cancelled") -> str:
    """What the server wrote to `note`, once it is `what` or after 30 s ("" when nothing)."""
    written = ""
    for _ in range(300):
        written = note.read_text() if note.exists() else ""
        if written == what:
            break
        await asyncio.sleep(0.1)
    return written


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_call_that_times_out_is_cancelled_on_the_server(pool, transport, tmp_path):
    """A timed-out call sends `notifications/cancelled` with its request id: the server
    stops the tool's work instead of finishing it for nobody."""
    note = tmp_path / "note"
    with serving(transport) as server:
        reply = await call(pool, server, "slow", seconds=30, note=str(note), timeout=0.3)
        assert reply.result.error_code == "timeout"
        assert await _noted(note) == "cancelled"
        # The session goes on serving, its request numbering intact.
        assert (await call(pool, server, "add", a=2, b=3)).result.result == "5"


async def test_a_call_whose_activity_is_cancelled_is_cancelled_on_the_server(pool, tmp_path):
    """Cancelled from outside (the activity was cancelled), the call tells the server too."""
    note = tmp_path / "note"
    server = stdio_server()
    running = asyncio.create_task(call(pool, server, "slow", seconds=30, note=str(note)))
    assert await _noted(note, "started") == "started"  # the tool runs on the server
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert await _noted(note) == "cancelled"


# -- templating and keys ------------------------------------------------------------------


async def test_templated_env_reaches_the_process_and_nothing_else(pool, monkeypatch):
    """`${NAME}` in `env` is the thread's value; the worker's own environment is not passed."""
    monkeypatch.setenv("WEFT_TEST_WORKER_SECRET", "worker-only")
    server = stdio_server(env={"TOKEN": "Bearer ${API_TOKEN}", "PLAIN": "$${NOT_ME}"})
    env = env_of(API_TOKEN="s3cret")
    assert (await call(pool, server, "env", env, name="TOKEN")).result.result == "Bearer s3cret"
    assert (await call(pool, server, "env", env, name="PLAIN")).result.result == "${NOT_ME}"
    leaked = await call(pool, server, "env", env, name="WEFT_TEST_WORKER_SECRET")
    assert leaked.result.result == "<unset>"
    assert (await call(pool, server, "env", env, name="PATH")).result.result != "<unset>"


async def test_a_missing_env_value_is_unavailable_naming_it(pool):
    """A `${NAME}` the thread lacks makes the server unavailable, naming the value and field."""
    server = stdio_server(env={"TOKEN": "${API_TOKEN}"})
    with pytest.raises(McpUnavailable) as caught:
        await call(pool, server, "pid")
    assert caught.value.server == "tools"
    assert "'API_TOKEN'" in str(caught.value)
    assert "env.TOKEN" in str(caught.value)


async def test_a_relative_cwd_starts_at_the_definitions_folder(pool, tmp_path):
    """A relative `cwd` (templated) resolves against the pool's root; none means the root."""
    (tmp_path / "work-a").mkdir()
    reply = await call(pool, stdio_server(cwd="work-${WHICH}"), "cwd", env_of(WHICH="a"))
    assert reply.result.result == str(tmp_path / "work-a")
    assert (await call(pool, stdio_server("plain"), "cwd")).result.result == str(tmp_path)


async def test_different_env_values_get_different_sessions(pool):
    """The same server with two env values runs two processes; the same env reuses one."""
    server = stdio_server(env={"TOKEN": "${API_TOKEN}"})
    one, other = env_of(API_TOKEN="one"), env_of(API_TOKEN="other")
    first = await server_pid(pool, server, one)
    assert await server_pid(pool, server, other) != first
    assert await server_pid(pool, server, one) == first


async def test_templated_url_and_headers_reach_the_http_server(pool, http):
    """`${NAME}` in `url` and `headers` is filled in; two header values are two sessions."""
    server = http_server_def(
        "http://127.0.0.1:${PORT}/mcp", headers={"Authorization": "Bearer ${API_TOKEN}"}
    )
    one = env_of(PORT=str(http.port), API_TOKEN="one")
    other = env_of(PORT=str(http.port), API_TOKEN="other")
    seen = await call(pool, server, "header", one, name="authorization")
    assert seen.result.result == "Bearer one"
    seen = await call(pool, server, "header", other, name="authorization")
    assert seen.result.result == "Bearer other"


async def test_concurrent_calls_share_one_session(pool):
    """Calls without an elicitation handler run at once on one session (one process)."""
    server = stdio_server()
    pid = await server_pid(pool, server)
    started = time.monotonic()
    replies = await asyncio.gather(*(call(pool, server, "slow", seconds=0.6) for _ in range(3)))
    assert [r.result.result for r in replies] == ["slept 0.6 s"] * 3
    assert time.monotonic() - started < 1.5
    assert await server_pid(pool, server) == pid


# -- sessions that die ----------------------------------------------------------------------


async def test_a_server_killed_between_calls_is_started_again(pool):
    """A stdio server killed between calls is started again by the next call, unseen."""
    server = stdio_server()
    pid = await server_pid(pool, server)
    os.kill(pid, signal.SIGKILL)
    assert await asyncio.to_thread(wait_gone, pid)
    await asyncio.sleep(0.3)  # the pool learns of it from the closed pipe, as between real calls
    reply = await call(pool, server, "add", a=1, b=1)
    assert reply.result.result == "2"
    assert await server_pid(pool, server) != pid


async def test_a_server_killed_mid_call_gives_outcome_unknown(pool):
    """A server that dies under a call gives `mcp_session_lost` (outcome unknown), not a resend."""
    server = stdio_server()
    pid = await server_pid(pool, server)
    running = asyncio.create_task(call(pool, server, "slow", seconds=5))
    await asyncio.sleep(0.4)
    os.kill(pid, signal.SIGKILL)
    reply = await asyncio.wait_for(running, 5)
    assert reply.result.status == "error"
    assert reply.result.error_code == "mcp_session_lost"
    assert "'tools'" in reply.result.error and "'slow'" in reply.result.error
    assert "may or may not have taken effect" in reply.result.error
    assert await server_pid(pool, server) != pid


async def test_an_http_server_restarted_is_reconnected(pool, http):
    """An HTTP server stopped and started again on its port serves the next call."""
    server = http_server_def(http.url)
    first = await server_pid(pool, server)
    await asyncio.to_thread(http.stop, kill=True)
    await asyncio.to_thread(http.start)
    reply = await call(pool, server, "add", a=20, b=22)
    assert reply.result.result == "42"
    assert await server_pid(pool, server) not in (first, None)


# -- start-up failures ------------------------------------------------------------------------


async def test_a_server_that_exits_at_once_is_unavailable_with_its_stderr(pool):
    """A server that exits at start is unavailable, naming it and quoting its stderr."""
    with pytest.raises(McpUnavailable) as caught:
        await pool.list_tools(stdio_server("quitter", args=["--mode", "exit"]), NO_ENV)
    message = str(caught.value)
    assert message.startswith("MCP server 'quitter': its process ended before it finished")
    assert "refusing to start (--mode exit)" in message


async def test_a_server_that_never_answers_times_out_at_start(pool):
    """A server that never answers `initialize` is unavailable after its startup timeout."""
    server = stdio_server("mute", args=["--mode", "hang"], startup_timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(McpUnavailable) as caught:
        await call(pool, server, "pid")
    assert time.monotonic() - started < 3
    assert "MCP server 'mute': did not answer `initialize`" in str(caught.value)
    assert "0.5 s" in str(caught.value)


async def test_a_server_that_does_not_speak_mcp_is_unavailable(pool):
    """A server that answers with what is not JSON-RPC is unavailable, quoting what it sent."""
    # The babbler answers at once (it imports nothing), so a loaded machine's slow start of
    # the MCP SDK cannot run out the startup timeout before it has said anything.
    server = McpServerDef(
        name="babbler", command="python", args=[str(BABBLER)], startup_timeout_seconds=5
    )
    with pytest.raises(McpUnavailable) as caught:
        await pool.list_tools(server, NO_ENV)
    assert "MCP server 'babbler': did not answer `initialize`" in str(caught.value)
    assert "it sent what is not MCP" in str(caught.value)
    assert "this is not JSON-RPC" in str(caught.value)


async def test_a_missing_command_is_unavailable(pool):
    """A command that does not exist is unavailable, naming the server and the command."""
    server = stdio_server("ghost").model_copy(update={"command": "weft-no-such-mcp-server"})
    with pytest.raises(McpUnavailable) as caught:
        await pool.list_tools(server, NO_ENV)
    assert str(caught.value) == (
        "MCP server 'ghost': could not run command 'weft-no-such-mcp-server': not found"
    )


async def test_a_refused_http_connection_is_unavailable(pool):
    """An HTTP server nobody listens for is unavailable, saying the connection failed."""
    server = http_server_def(f"http://127.0.0.1:{free_port()}/mcp", startup_timeout_seconds=5)
    with pytest.raises(McpUnavailable) as caught:
        await pool.list_tools(server, NO_ENV)
    assert "MCP server 'tools_http': could not connect to http://127.0.0.1:" in str(caught.value)


# -- list_changed ---------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_list_changed_relists_after_the_call(pool, transport):
    """After the server reports `list_changed`, that call's reply carries the new listing, once."""
    with serving(transport) as server:
        await pool.list_tools(server, NO_ENV)
        reply = await call(pool, server, "add_tool", name="extra")
        assert reply.result.result == "added extra"
        assert reply.relisted is not None
        assert "extra" in [tool.name for tool in reply.relisted]
        again = await call(pool, server, "extra")
        assert again.result.result == "extra was added at run time"
        assert again.relisted is None


# -- elicitation ------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_elicitation_is_answered_by_the_calls_handler(pool, transport):
    """A server's elicitation reaches the calling handler; its accepted content goes back."""
    asked: list[tuple[str, dict[str, Any]]] = []

    async def handler(message: str, schema: dict[str, Any]) -> ElicitationAnswer:
        asked.append((message, schema))
        return ElicitationAnswer(action_id="a1", action="accept", content={"name": "Ada"})

    with serving(transport) as server:
        reply = await call(pool, server, "ask_name", elicit=handler)
    assert reply.result.result == "Hello, Ada!"
    assert asked[0][0] == "What is your name?"
    assert asked[0][1]["properties"]["name"]["type"] == "string"


async def test_an_elicitation_declined_or_without_handler(pool):
    """A declined elicitation, and one during a call without a handler, are declines."""
    server = stdio_server()
    declined = ElicitationAnswer(action_id="a1", action="decline")
    reply = await call(pool, server, "ask_name", elicit=answering(declined))
    assert reply.result.result == "declined"
    cancelled = ElicitationAnswer(action_id="a2", action="cancel")
    assert (await call(pool, server, "ask_name", elicit=answering(cancelled))).result.result == (
        "cancelled"
    )
    assert (await call(pool, server, "ask_name")).result.result == "declined"


async def test_the_handler_runs_in_the_callers_context_and_stops_the_clock(pool):
    """The handler sees the caller's context, and a person's time does not count as the
    tool's: a slow answer does not time the call out."""
    who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")
    seen: list[str] = []

    async def handler(message: str, schema: dict[str, Any]) -> ElicitationAnswer:
        seen.append(who.get())
        await asyncio.sleep(1.0)
        return ElicitationAnswer(action_id="a1", action="accept", content={"name": "Grace"})

    server = stdio_server()
    await server_pid(pool, server)  # opened by another "activity"
    who.set("the calling activity")
    reply = await call(pool, server, "ask_name", elicit=handler, timeout=0.6)
    assert reply.result.result == "Hello, Grace!"
    assert seen == ["the calling activity"]


def slow_person(release: asyncio.Event, name: str = "Lin") -> Any:
    """A handler that answers `name` once `release` is set."""

    async def handler(message: str, schema: dict[str, Any]) -> ElicitationAnswer:
        await release.wait()
        return ElicitationAnswer(action_id="a1", action="accept", content={"name": name})

    return handler


async def test_a_call_that_can_be_asked_has_its_session_alone(pool):
    """While a call waits for a person, other calls (with a handler or without) get
    another session of the same server and env, not a wait."""
    release = asyncio.Event()
    server = stdio_server()
    first = await server_pid(pool, server)
    asking = asyncio.create_task(call(pool, server, "ask_name", elicit=slow_person(release)))
    await asyncio.sleep(0.3)
    other = await call(pool, server, "pid", elicit=slow_person(release), timeout=5)
    assert int(other.result.result) != first
    assert await server_pid(pool, server) == int(other.result.result)
    release.set()
    assert (await asyncio.wait_for(asking, 5)).result.result == "Hello, Lin!"


async def test_past_max_sessions_a_call_waits_its_turn(tmp_path):
    """With no session left to open for a server and env, a call waits for its turn; past
    its timeout it was not sent at all, and says so."""
    pool = McpSessionPool(root=tmp_path)
    try:
        release = asyncio.Event()
        server = stdio_server(max_sessions=1)
        asking = asyncio.create_task(call(pool, server, "ask_name", elicit=slow_person(release)))
        await asyncio.sleep(1.5)
        waiting = await call(pool, server, "echo", text="hi", timeout=0.3)
        assert waiting.result.error_code == "timeout"
        assert waiting.result.error == (
            "MCP server 'tools': tool 'echo' was not called: its sessions stayed busy with "
            "other calls (one may be asking a person) for 0.3 s"
        )
        release.set()
        assert (await asyncio.wait_for(asking, 5)).result.result == "Hello, Lin!"
    finally:
        await pool.aclose()


# -- closing ------------------------------------------------------------------------------------------


async def test_idle_sessions_close_and_their_processes_are_reaped(tmp_path):
    """A session idle for `idle_seconds` closes, and its process is reaped (no zombie)."""
    pool = McpSessionPool(root=tmp_path, idle_seconds=0.3)
    try:
        pid = await server_pid(pool, stdio_server())
        assert await asyncio.to_thread(wait_gone, pid, 5.0)
    finally:
        await pool.aclose()
    assert server_children() == []


async def test_the_least_recently_used_session_closes_past_the_limit(tmp_path):
    """Past `max_sessions`, the least recently used idle session is closed."""
    pool = McpSessionPool(root=tmp_path, max_sessions=1)
    try:
        server = stdio_server(env={"TOKEN": "${API_TOKEN}"})
        first = await server_pid(pool, server, env_of(API_TOKEN="one"))
        await server_pid(pool, server, env_of(API_TOKEN="two"))
        assert await asyncio.to_thread(wait_gone, first, 8.0)
    finally:
        await pool.aclose()


async def test_aclose_stops_every_server_and_leaves_no_child(tmp_path):
    """`aclose` stops every stdio server, mid-call too, reaps them all and closes their pipes."""
    fds_before = len(os.listdir("/proc/self/fd"))
    pool = McpSessionPool(root=tmp_path)
    server = stdio_server(env={"TOKEN": "${API_TOKEN}"})
    pids = [await server_pid(pool, server, env_of(API_TOKEN=v)) for v in ("a", "b")]
    running = asyncio.create_task(call(pool, server, "slow", env_of(API_TOKEN="a"), seconds=10))
    await asyncio.sleep(0.3)
    await pool.aclose()
    assert (await asyncio.wait_for(running, 5)).result.error_code == "mcp_session_lost"
    assert [await asyncio.to_thread(wait_gone, pid, 1.0) for pid in pids] == [True, True]
    assert server_children() == []
    assert len(os.listdir("/proc/self/fd")) <= fds_before
    with pytest.raises(McpUnavailable):
        await call(pool, server, "pid", env_of(API_TOKEN="a"))
