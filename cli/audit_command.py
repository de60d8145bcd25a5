"""`weft audit`: who did each control action (over HTTP a key id, `jwt:<sub>` or `token`;
`cli:<os user>` from the CLI, `python` from the Python client), for which tenant, on which
thread, and how it ended (docs/tenants.md#audit)."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from weft.store import Store
from weft.store.audit import AuditEntry
from weft.workers.config import WeftConfig


def register(subparsers: Any) -> None:
    """Add `audit` to the main `weft` CLI's subparsers."""
    audit = subparsers.add_parser(
        "audit", help="who did each control action (HTTP, CLI, Python), newest last"
    )
    audit.add_argument("--thread", help="only the actions on this thread")
    audit.add_argument(
        "--tenant", help="only the actions for this tenant (default: `weft --tenant`'s)"
    )
    audit.add_argument(
        "--subject", help="only the actions of this key id (or `token`, `cli:<user>`, `python`)"
    )
    audit.add_argument("--limit", type=int, default=100, help="the newest N (default: 100)")
    audit.add_argument("--json", action="store_true", help="print them as JSON")
    audit.set_defaults(handler=show)


async def show(args: argparse.Namespace, config: WeftConfig) -> int:
    if args.limit < 1:
        raise ValueError(f"--limit {args.limit}: at least 1")
    store = await asyncio.to_thread(Store.open, config.store_url())
    with store:
        entries = await asyncio.to_thread(
            store.audit.list,
            thread_id=args.thread,
            tenant=args.tenant,
            subject=args.subject,
            limit=args.limit,
        )
    if args.json:
        print(json.dumps([_wire(entry) for entry in entries], indent=2))
        return 0
    if not entries:
        print("no control actions recorded")
        return 0
    for entry in entries:
        who = entry.subject + (f" ({entry.tenant})" if entry.tenant else "")
        print(f"{_iso(entry.at)}  {who}  {entry.method} {entry.path}  {entry.status}")
    return 0


def _wire(entry: AuditEntry) -> dict[str, Any]:
    return {
        "at": _iso(entry.at),
        "subject": entry.subject,
        "tenant": entry.tenant,
        "method": entry.method,
        "route": entry.route,
        "path": entry.path,
        "threadId": entry.thread_id,
        "status": entry.status,
    }


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["register", "show"]
