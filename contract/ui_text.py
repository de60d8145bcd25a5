"""Short, secret-free text for the Temporal UI: one line, bounded, secrets redacted.

Summaries land in Temporal history as plain payloads (the codec encrypts only payloads
that carry env), so anyone who can read the history can read them: nothing here may
carry a secret or much content. Client and workflow both build them, so they live here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from weft.contract.messages import QueuedMessage
from weft.contract.thread_env import redact as redact_with
from weft.contract.thread_env import secret_values as secret_values

SUMMARY_MAX_CHARS = 100
REDACTED = "[secret]"
ELLIPSIS = "…"

# Argument names whose values are withheld whatever they hold.
_SECRET_NAME = re.compile(
    r"secret|token|passw|pwd|api[_-]?key|apikey|auth|credential|private[_-]?key|cookie|session[_-]?key",
    re.IGNORECASE,
)
_WHITESPACE = re.compile(r"\s+")


def is_secret_name(name: str) -> bool:
    """Whether a key name looks like it holds a credential."""
    return bool(_SECRET_NAME.search(name))


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a secret replaced by `[secret]`."""
    return redact_with(text, secrets, REDACTED)


def one_line(text: str, limit: int = SUMMARY_MAX_CHARS) -> str:
    """Whitespace collapsed to single spaces, cut to `limit` characters with an ellipsis."""
    line = _WHITESPACE.sub(" ", text).strip()
    if len(line) <= limit:
        return line
    return line[: max(limit - 1, 0)].rstrip() + ELLIPSIS


def safe_line(text: str, secrets: Iterable[str], limit: int = SUMMARY_MAX_CHARS) -> str:
    """Redact first, then cut: cutting first could leave the start of a secret behind."""
    return one_line(redact(text, secrets), limit)


def first_user_line(messages: Sequence[QueuedMessage]) -> str | None:
    """The first non-blank line of the first user message (or the assistant's, a side b
    subagent's task), if there is one."""
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        for line in message.content.splitlines():
            if line.strip():
                return line
    return None


def thread_summary(head: str, messages: Sequence[QueuedMessage], secrets: Sequence[str]) -> str:
    """A thread's static summary: `head` (its agent) and the first line a user gave it."""
    line = first_user_line(messages)
    text = f"{head} · {redact(line, secrets)}" if line else head
    return safe_line(text, secrets)
