"""`weft thread send ID [TEXT | -] [--file PATH]`: queue a message, from the command line, a
file or stdin.

One argument string is capped by the OS (128 KiB on Linux), so large content comes by file
or stdin. It goes through `Threads` with the store: content over 64 KiB is uploaded as a
blob and the signal carries a preview (client/threads.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from weft.cli.thread_guard import acting_threads
from weft.workers.config import WeftConfig

EXIT_USAGE = 2
STDIN = "-"


class MessageInputError(ValueError):
    """Where the message should come from is unclear, or it could not be read."""


def register(actions: Any) -> None:
    """Add `send` to the `weft thread` subcommands."""
    send = actions.add_parser(
        "send",
        help="queue a message (queue_message signal); TEXT, --file PATH, or stdin",
        description="Queue a message on the thread. The text comes from TEXT, from --file "
        "PATH, or from stdin (TEXT or PATH '-', or no TEXT with stdin not a terminal). "
        "Content over 64 KiB is stored as a blob and the model reads it from the store.",
    )
    send.add_argument("thread_id")
    send.add_argument("content", nargs="?", help="the message text; '-' reads stdin")
    send.add_argument("--file", help="read the message from this file ('-': stdin)")
    send.add_argument("--role", default="user", choices=["user", "assistant", "system"])
    send.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Read the message and queue it; unclear or unreadable input exits 2 with the reason."""
    try:
        content = await asyncio.to_thread(message_text, args.content, args.file)
    except MessageInputError as err:
        print(f"weft: {err}", file=sys.stderr)
        return EXIT_USAGE
    async with acting_threads(config) as threads:
        await threads.send(args.thread_id, content, role=args.role)
    print(f"queued a {args.role} message on {args.thread_id} ({len(content)} characters)")
    return 0


def message_text(content: str | None, file: str | None) -> str:
    """The message from TEXT, --file or stdin, as the flags say."""
    if content is not None and file is not None:
        raise MessageInputError("give the message as TEXT or --file, not both")
    if file is not None:
        return _read(file)
    if content == STDIN or (content is None and not sys.stdin.isatty()):
        return _read(STDIN)
    if content is None:
        raise MessageInputError("no message: give TEXT, --file PATH, or pipe it on stdin")
    return content


def _read(source: str) -> str:
    """The UTF-8 text of a file or of stdin; an empty one is refused, as it is surely a
    mistake (a wrong path in a pipe) rather than a message."""
    name = "stdin" if source == STDIN else source
    try:
        raw = sys.stdin.buffer.read() if source == STDIN else Path(source).read_bytes()
        text = raw.decode("utf-8")
    except OSError as err:
        raise MessageInputError(f"cannot read {name}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise MessageInputError(
            f"{name} is not UTF-8 text: {err.reason} at byte {err.start}"
        ) from None
    if not text:
        raise MessageInputError(f"no message: {name} is empty")
    return text
