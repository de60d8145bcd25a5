"""A real MCP server for weft's tests, built with the SDK's FastMCP.

Run it over stdio (the default) or as a streamable HTTP server on loopback:

    python tools_server.py                      # stdio
    python tools_server.py --http --port 8765   # http://127.0.0.1:8765/mcp
    python tools_server.py --bad-schema         # the `broken` tool's inputSchema is {"type": 5}
    python tools_server.py --mode hang          # never answers `initialize`
    python tools_server.py --mode exit          # writes to stderr and exits at once (status 3)

A call of a tool it does not have is answered with a JSON-RPC error (INVALID_PARAMS).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import uvicorn
from mcp import types
from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from pydantic import BaseModel

# A 1x1 PNG: enough for an image part without putting much base64 anywhere.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154"
    "789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Person(BaseModel):
    """What `ask_name` elicits."""

    name: str


# What FastMCP hands a tool that takes a context (it finds the parameter by this type).
ToolContext = Context[ServerSession, object, object]


def build(*, bad_schema: bool) -> FastMCP:
    """The server and its tools (`broken` gets a malformed inputSchema when asked)."""
    server = FastMCP("weft-test-tools", log_level="WARNING")

    @server.tool(structured_output=False)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def fail(message: str) -> str:
        """Fail with the message (an isError result)."""
        raise ValueError(message)

    @server.tool(structured_output=False)
    async def slow(seconds: float, note: str = "") -> str:
        """Sleep for `seconds`, then answer; with a file `note`, write "started" to it first,
        and "cancelled" when the client cancels the call before the sleep ends."""
        if note:
            Path(note).write_text("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if note:
                Path(note).write_text("cancelled")
            raise
        return f"slept {seconds:g} s"

    @server.tool(structured_output=False)
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool(structured_output=False)
    def env(name: str) -> str:
        """The server process's environment variable `name` ("<unset>" when it is not)."""
        return os.environ.get(name, "<unset>")

    @server.tool(structured_output=False)
    def cwd() -> str:
        """The server process's working directory."""
        return os.getcwd()

    @server.tool(structured_output=False)
    def header(name: str, ctx: ToolContext) -> str:
        """The HTTP request's header `name` ("<none>" without one, or over stdio)."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        return headers.get(name, "<none>") if headers is not None else "<none>"

    @server.tool()
    def weather(city: str) -> dict[str, object]:
        """Structured content: the weather in `city`."""
        return {"city": city, "celsius": 21}

    @server.tool(structured_output=False)
    def picture() -> list[object]:
        """A text part, an image part and an embedded resource."""
        resource = types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///notes.txt", text="some notes"),
        )
        return ["a picture:", Image(data=PNG, format="png"), resource]

    @server.tool(structured_output=False)
    async def ask_name(ctx: ToolContext) -> str:
        """Ask a person for their name (elicitation) and greet them."""
        answer = await ctx.elicit("What is your name?", Person)
        if answer.action == "accept":
            return f"Hello, {answer.data.name}!"
        return "declined" if answer.action == "decline" else "cancelled"

    @server.tool(structured_output=False)
    async def add_tool(name: str, ctx: ToolContext) -> str:
        """Register a tool called `name` and tell the client its tool list changed."""

        def added() -> str:
            return f"{name} was added at run time"

        server.add_tool(
            added, name=name, description=f"Added at run time: {name}", structured_output=False
        )
        # Sent on this request's stream, so the client has it before the call's result.
        await ctx.session.send_notification(
            types.ServerNotification(types.ToolListChangedNotification()),
            related_request_id=ctx.request_id,
        )
        return f"added {name}"

    @server.tool(structured_output=False)
    def broken(x: int) -> int:
        """A tool whose inputSchema is malformed under --bad-schema."""
        return x

    if bad_schema:
        server._tool_manager._tools["broken"].parameters = {"type": 5}
    _unknown_tools_are_rpc_errors(server)
    return server


def _unknown_tools_are_rpc_errors(server: FastMCP) -> None:
    """Answer a call of an unknown tool with a JSON-RPC error, as many servers do (FastMCP
    itself returns an isError result), so clients' handling of protocol errors is tested."""
    handlers = server._mcp_server.request_handlers
    listed = handlers[types.CallToolRequest]

    async def call(request: types.CallToolRequest) -> types.ServerResult:
        name = request.params.name
        if server._tool_manager.get_tool(name) is None:
            raise McpError(
                types.ErrorData(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
            )
        return await listed(request)

    handlers[types.CallToolRequest] = call


def hang() -> None:
    """Read stdin and never answer; exit when it closes."""
    for _ in sys.stdin:
        pass


def serve_http(server: FastMCP, port: int) -> None:
    """Streamable HTTP on 127.0.0.1:`port` (path /mcp); short graceful shutdown."""
    config = uvicorn.Config(
        server.streamable_http_app(),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    uvicorn.Server(config).run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", action="store_true", help="streamable HTTP, not stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bad-schema", action="store_true")
    parser.add_argument("--mode", choices=["serve", "hang", "exit"], default="serve")
    options = parser.parse_args()
    if options.mode == "exit":
        print("tools_server: refusing to start (--mode exit)", file=sys.stderr, flush=True)
        sys.exit(3)
    if options.mode == "hang":
        hang()
        return
    server = build(bad_schema=options.bad_schema)
    if options.http:
        serve_http(server, options.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
