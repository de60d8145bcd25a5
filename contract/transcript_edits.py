"""The intents behind ThreadState's transcript and env edits, as both sides read them.

A tool's `inject_message`, `delete_message` and `set_env` run in an activity; the workflow
(`workflows/transcript_edits.py`) applies what they return after the tool's result is
stored: it places an injected message, drops deleted ids from its index, and keeps a set
env value in its view of the thread's env.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from weft.contract.messages import QueuedMessage
from weft.contract.thread_env import EnvEntry
from weft.contract.wire import CamelModel

# Env names: a letter or underscore, then letters, digits, `_`, `.` or `-` (128 at most).
# This keeps names usable in prompts (`{type: env, property}`) and in shells, and keeps
# them clear of the sealed-column envelope key (`$weftEncrypted`, store/sealed.py).
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$"


class InjectedMessage(QueuedMessage):
    """`inject_message`: a message for the transcript that starts no turn; its id is the
    activity's, so a retried tool names the same message."""

    message_id: str = Field(min_length=1, max_length=256)


class DeletedMessages(CamelModel):
    """`messages_deleted`: the ids a tool deleted from the store (a message and the tool
    results answering its calls)."""

    ids: list[str] = Field(min_length=1)


class EnvSet(CamelModel):
    """`set_env`: thread env values, `{env: {name: {value, type}}}`.

    The field is named `env` on purpose: the payload converter marks every payload that
    carries a non-empty `env` (contract/thread_env.py `carries_env`), so the tool result
    carrying this intent is encrypted in Temporal history when keys are configured.
    """

    env: dict[str, EnvEntry] = Field(min_length=1)

    @field_validator("env")
    @classmethod
    def _names(cls, env: dict[str, EnvEntry]) -> dict[str, EnvEntry]:
        for name in env:
            check_env_name(name)
        return env


def check_env_name(name: object) -> str:
    """`name` when it is a valid env name; otherwise ValueError saying what a name may be."""
    if not isinstance(name, str) or not re.fullmatch(ENV_NAME_PATTERN, name):
        raise ValueError(
            f"env name {name!r} is not valid: it must start with a letter or `_` and hold "
            "only letters, digits, `_`, `.` or `-` (128 characters at most)"
        )
    return name
