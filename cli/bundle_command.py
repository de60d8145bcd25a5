"""`weft thread export ID -o FILE` and `weft thread import FILE [--as ID]`: one portable
bundle of a thread, and that bundle brought into this store as a closed thread
(docs/export-import.md)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.client.bundles import export_thread, import_bundle
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
    store = await _store(config)
    try:
        ref = await import_bundle(store, args.file, as_id=args.as_id)
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
