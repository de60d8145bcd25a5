"""`weft codec-server` (the codec over HTTP for the Temporal UI and CLI) and `weft codec-key`."""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
from datetime import UTC, datetime
from typing import Any

from weft.activities.crypto import new_key
from weft.transport.codec import EncryptionCodec
from weft.workers.config import ConfigError, WeftConfig
from weft.workers.secrets import load_keyring


def register(subparsers: Any) -> None:
    """Add `codec-server` and `codec-key` to the main `weft` CLI's subparsers."""
    server = subparsers.add_parser(
        "codec-server", help="serve the payload codec to the Temporal UI and CLI"
    )
    server.add_argument("--host", help="listen address (default: codec.server.host, 127.0.0.1)")
    server.add_argument("--port", type=int, help="listen port (default: codec.server.port, 8081)")
    server.add_argument(
        "--allow-origin",
        help="the Temporal UI's origin (default: $WEFT_CODEC_ALLOW_ORIGIN, http://127.0.0.1:8233)",
    )
    server.set_defaults(handler=serve)
    key = subparsers.add_parser("codec-key", help="print a new encryption key entry (id:key)")
    key.add_argument("--id", help="the key id (default: k<date and time>)")
    key.set_defaults(handler=print_key)


async def serve(args: argparse.Namespace, config: WeftConfig) -> int:
    """Serve until interrupted; the token comes from WEFT_CODEC_TOKEN or is made and shown."""
    from weft.workers.codec_server import CodecServer

    keyring = load_keyring(config)
    if keyring is None:
        raise ConfigError(
            "no encryption keys: set WEFT_CODEC_KEYS or create the codec.keysFile "
            "(`weft codec-key` prints a new entry)"
        )
    settings = config.codec.server
    token = settings.token
    if not token:
        token = secrets.token_urlsafe(32)
        print(f"weft codec-server: no WEFT_CODEC_TOKEN set; this run's token: {token}", flush=True)
    server = CodecServer(
        EncryptionCodec(keyring, encrypt="all"),
        token=token,
        allow_origin=args.allow_origin or settings.allow_origin,
        host=args.host or settings.host,
        port=args.port if args.port is not None else settings.port,
    )
    with server:
        print(
            f"weft codec-server: {server.url} (keys {', '.join(keyring.key_ids)}; "
            f"UI origin {server.allow_origin}; browser sign-in at {server.url}/login)",
            flush=True,
        )
        await asyncio.Event().wait()
    return 0


async def print_key(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print `id:base64key`: prepend it to the keys to make it the active key."""
    key_id = args.id or datetime.now(UTC).strftime("k%Y%m%d%H%M%S")
    sys.stdout.write(f"{key_id}:{new_key()}\n")
    return 0


__all__ = ["print_key", "register", "serve"]
