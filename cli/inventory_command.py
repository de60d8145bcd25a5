"""`weft thread tools ID` and `weft thread environment ID`: a thread's tool inventory and
execution environment, live or as it stored them when it closed (docs/read-models.md).

Readable by default, one line per tool or env name; `--json` prints the snapshot as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.client.threads import Threads
from weft.contract.inventory import ExecutionEnvironment, InventoryTool, ToolInventory
from weft.store import Store
from weft.workers.config import WeftConfig


def register(actions_parser: Any) -> None:
    """Add `tools` and `environment` to the `weft thread` subcommands."""
    tools = actions_parser.add_parser(
        "tools",
        help="the tools the thread can call, with permissions and sources (from the store "
        "if closed)",
        description="Every tool the thread's active agent, side and prompt can call "
        "(function, prompt, agent, MCP, built-in), its permission (allow/ask/deny), whether "
        "an optional flag disables it, and where it comes from.",
    )
    environment = actions_parser.add_parser(
        "environment",
        help="env names (never values), filesystem, limits and running code (from the "
        "store if closed)",
        description="The thread's execution environment: env variable names with their "
        "type and layer (values are never shown), its filesystem root, limits, and what it "
        "knows of running code.",
    )
    for parser, handler in ((tools, run_tools), (environment, run_environment)):
        parser.add_argument("thread_id")
        parser.add_argument("--json", action="store_true", help="print the snapshot as JSON")
        parser.set_defaults(handler=handler, closed_ok=True)


async def run_tools(args: argparse.Namespace, config: WeftConfig) -> int:
    store = Store.open(config.store_url())
    try:
        found = await (await _threads(config, store)).tool_inventory(args.thread_id)
    finally:
        store.close()
    if found is None:
        return _nothing(args.thread_id, "tool inventory")
    print(_json(found) if args.json else render_tools(found))
    return 0


async def run_environment(args: argparse.Namespace, config: WeftConfig) -> int:
    store = Store.open(config.store_url())
    try:
        found = await (await _threads(config, store)).execution_environment(args.thread_id)
    finally:
        store.close()
    if found is None:
        return _nothing(args.thread_id, "execution environment")
    print(_json(found) if args.json else render_environment(found))
    return 0


def render_tools(found: ToolInventory) -> str:
    """One line per tool: name, kind, permission, source; then MCP servers and unknowns."""
    lines = [
        f"thread {found.thread_id} ({found.source}): agent {found.agent}, side {found.side}, "
        f"prompt {found.prompt}, permission mode {found.mode}"
    ]
    lines += [f"  {_tool_line(tool)}" for tool in found.tools] or ["  (no tools)"]
    for server in found.mcp_servers:
        state = (
            f"{server.status}, {server.tools} tools" if server.status == "ready" else server.status
        )
        lines.append(f"mcp {server.server}: {state}{f' ({server.error})' if server.error else ''}")
    lines += [f"unknown: {note}" for note in found.unknown]
    return "\n".join(lines)


def render_environment(found: ExecutionEnvironment) -> str:
    """Env names by layer, the filesystem root, limits and what runs, one per line."""
    lines = [f"thread {found.thread_id} ({found.source}): agent {found.agent}, side {found.side}"]
    for variable in found.env:
        required = ", required" if variable.required else ""
        lines.append(f"  env {variable.name} ({variable.type}, from {variable.layer}{required})")
    lines += [f"  env {name}: required, not set" for name in found.missing_variables]
    lines += [
        f"  filesystem {root.get('root')} ({root.get('kind')})" for root in found.workspace_roots
    ]
    known = {k: v for k, v in found.limits.items() if v is not None and not isinstance(v, dict)}
    lines.append("  limits " + ", ".join(f"{k}={v}" for k, v in known.items()))
    awaiting = found.processes.get("toolCallsAwaitingResults") or []
    lines.append(f"  tool calls awaiting results: {', '.join(awaiting) or 'none'}")
    lines += [f"unknown: {note}" for note in found.unknown]
    return "\n".join(lines)


def _tool_line(tool: InventoryTool) -> str:
    permission = f"{tool.permission.decision} ({tool.permission.decided_by})"
    if tool.permission.argument_rules:
        permission += f", {len(tool.permission.argument_rules)} argument rule(s)"
    source = tool.source
    origin = {
        "definition": "definitions",
        "runtime": "the runtime",
        "prompt": f"prompt {source.prompt}",
        "agent": f"agent {source.agent}",
        "mcp": f"mcp {source.server}.{source.tool}",
    }[source.type]
    enabled = "" if tool.enabled else f"  DISABLED: {tool.disabled_reason}"
    return f"{tool.name:<24} {tool.kind:<8} {permission:<40} from {origin}{enabled}"


async def _threads(config: WeftConfig, store: Store) -> Threads:
    client = await client_from_config(config)
    return Threads(client, task_queue=config.temporal.task_queue, store=store)


def _json(found: ToolInventory | ExecutionEnvironment) -> str:
    return json.dumps(found.model_dump(mode="json", by_alias=True), indent=2)


def _nothing(thread_id: str, what: str) -> int:
    # The guard found the thread, but no worker answered and it stored nothing yet.
    print(f"weft: thread {thread_id!r} has no {what} yet (no worker answered)", file=sys.stderr)
    return 1
