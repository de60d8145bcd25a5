"""The JSON shapes the host sends down the pipe to a worker: the job and the messages.

Values marshalled by `Encoder` stay `Any` here: their shape is the marshal format's, not
the protocol's. Messages from the worker back to the host stay plain dicts, since the host
reads them defensively (`msg.get(...)`), field by field.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, TypeGuard


class ExecuteSpec(TypedDict):
    """Which export to call once the entry module has settled, and its encoded arguments."""

    fn: str
    args: Any


class Job(TypedDict):
    """One validated `runCode` call, as `prepare` builds it and the engine runs it."""

    source: str
    filename: str
    language: Literal["typescript", "javascript"]
    modules: dict[str, str]
    importNames: dict[str, list[str]]
    imports: dict[str, Any]
    globals: Any
    globalNames: list[str]
    execute: ExecuteSpec
    memoryLimitBytes: int


class RunMessage(TypedDict):
    t: Literal["run"]
    job: Job


class ReplyMessage(TypedDict):
    """The result of a host call the sandbox is blocked on; `reply` is JSON text."""

    t: Literal["reply"]
    id: int
    reply: str


class InvokeMessage(TypedDict):
    """The host calling a sandbox function back, during one of the sandbox's host calls."""

    t: Literal["invoke"]
    id: int
    fn: int
    args: str


HostMessage = RunMessage | ReplyMessage | InvokeMessage


def is_run(msg: HostMessage) -> TypeGuard[RunMessage]:
    # `.get`, not `[...]`: a worker between runs ignores anything that is not a run.
    return msg.get("t") == "run"
