"""`weft thread export ID -o FILE` and `weft thread import FILE [--as ID]`: one portable
bundle of a thread, and that bundle brought into this store as a closed thread
(docs/export-import.md).

An import lands in the tenant the bundle's thread row names, or in `--tenant`'s (re-homed,
as `POST /threads/import` re-homes into a tenant key's tenant). Under `weft --tenant T` it
is T's whatever the bundle names, and its id (`--as`, else the bundle's) must be one T may
choose for a new thread, as over HTTP: one of T's own, or a free id beginning with `T:`."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import audit_trail, check_new_thread_id
from weft.client.audit_trail import IMPORT
from weft.client.bundles import bundle_thread_id, export_thread, import_bundle
from weft.contract.tenants import check_tenant
from weft.store import Store
from weft.workers.config import WeftConfig
from weft.workers.secrets import load_keyring


def register(actions_parser: Any) -> None:
    """Add `export` and `import` to the `weft thread` subcommands."""
    export = actions_parser.add_parser(
        "export",
        help="write a thread's bundle: events, messages, files, KV, definitions, history",
        description="Write one versioned bundle of the thread: its events and messages, "
        "files with their bytes, KV, effects, child references, definition snapshots and "
        "Temporal histories. Env values are never written, only their names and types.",
    )
    export.add_argument("thread_id")
    export.add_argument("-o", "--output", required=True, metavar="FILE", help="bundle to write")
    export.set_defaults(handler=run_export, closed_ok=True)
    imported = actions_parser.add_parser(
        "import",
        help="bring a bundle into this store as a closed thread",
        description="Import a bundle written by `weft thread export` into this store as a "
        "closed thread, readable like any other; refused when the id is taken.",
    )
    imported.add_argument("file", metavar="FILE")
    imported.add_argument("--as", dest="as_id", metavar="ID", help="import under another id")
    imported.add_argument(
        "--tenant",
        help="the tenant the thread lands in (default: the one the bundle names; under"
        " `weft --tenant T`: T); docs/tenants.md",
    )
    imported.set_defaults(handler=run_import)


async def run_export(args: argparse.Namespace, config: WeftConfig) -> int:
    client = await client_from_config(config)
    store = await _store(config)
    try:
        ref = await export_thread(
            client, store, args.thread_id, args.output, namespace=config.temporal.namespace
        )
    finally:
        store.close()
    print(f"{ref.path}  sha256:{ref.sha256}")
    return 0


async def run_import(args: argparse.Namespace, config: WeftConfig) -> int:
    if args.tenant is not None:
        try:
            check_tenant(args.tenant)
        except ValueError as err:
            raise ValueError(f"--tenant: {err}") from None
    if getattr(args, "acting_tenant", None) is not None:
        # Checked as a chosen start id is: the answer never says whether another tenant
        # holds the id (cli/thread_guard.py `check_new_thread_id`).
        thread_id = args.as_id or await asyncio.to_thread(bundle_thread_id, args.file)
        await check_new_thread_id(args, config, thread_id)
    store = await _store(config)
    try:
        # Recorded as `POST /threads/import` is over HTTP, refusals too.
        async with audit_trail(store).acting(IMPORT, tenant=args.tenant) as outcome:
            ref = await import_bundle(store, args.file, as_id=args.as_id, tenant=args.tenant)
            outcome.thread_id = ref.thread_id
    finally:
        store.close()
    print(
        f"{ref.thread_id}  (closed; from {ref.manifest.source_namespace}/"
        f"{ref.manifest.thread_id}, sha256:{ref.sha256})"
    )
    return 0


async def _store(config: WeftConfig) -> Store:
    # With keys, env sealed at rest is read (export) and written sealed (import).
    return await asyncio.to_thread(Store.open, config.store_url(), keyring=load_keyring(config))
