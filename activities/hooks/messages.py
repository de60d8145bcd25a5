"""The message hooks: `before/after_create_message` where messages are written,
`before/after_update_message` around `ThreadState.update_message`.

Hooks see messages as the spec's dicts (snake_case, as stored). A `before_create_message`
hook may rewrite a message but not move it: its id, thread, position, role, tool call id,
parent, depth, side and turn are the workflow's, which has already indexed it.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from weft.activities.hooks.runner import HookRunner
from weft.contract.hooks import HOOK_BLOCKED, HookBlock
from weft.contract.messages import Message

# What a before_create_message hook may not change (the workflow's index holds them).
FIXED_FIELDS = (
    "id",
    "thread_id",
    "position",
    "role",
    "tool_call_id",
    "parent_id",
    "depth",
    "side",
    "turn_id",
)
UPDATABLE_FIELDS = ("content", "metadata")


class UpdateRefused(PermissionError):
    """A `before_update_message` hook refused `update_message`; the message is unchanged."""


async def before_create(
    runner: HookRunner | None, messages: list[Message]
) -> tuple[list[Message], list[HookBlock]]:
    """The messages as the hooks left them, without those a hook refused (and why)."""
    if runner is None or not runner.has("before_create_message"):
        return messages, []
    kept: list[Message] = []
    blocks: list[HookBlock] = []
    for message in messages:
        outcome = await runner.run(
            "before_create_message",
            message.model_dump(mode="json"),
            check=_same_place(message),
            about={"messageId": message.id},
        )
        if outcome.blocked is not None:
            blocks.append(outcome.blocked.model_copy(update={"message_id": message.id}))
        else:
            kept.append(Message.model_validate(outcome.data))
    return kept, blocks


async def after_create(runner: HookRunner | None, messages: list[Message]) -> None:
    """Show each message just written to the `after_create_message` hooks."""
    if runner is None or not runner.has("after_create_message"):
        return
    for message in messages:
        await runner.run(
            "after_create_message", message.model_dump(mode="json"), about={"messageId": message.id}
        )


async def before_update(
    runner: HookRunner | None, current: Message, patch: dict[str, Any]
) -> dict[str, Any]:
    """The patch as the `before_update_message` hooks left it; `UpdateRefused` if refused."""
    if runner is None or not runner.has("before_update_message"):
        return patch
    outcome = await runner.run(
        "before_update_message",
        {"message": current.model_dump(mode="json"), "update": patch},
        check=_patch(current),
        about={"messageId": current.id},
    )
    if outcome.blocked is not None:
        raise UpdateRefused(
            f"hook {outcome.blocked.hook_id!r} refused to update message {current.id!r}: "
            f"{outcome.blocked.reason}"
        )
    update = outcome.data["update"]
    return dict(update)


def blocked_error(blocks: list[HookBlock]) -> ApplicationError:
    """The activity failure that ends the turn with `hook_blocked` (workflows/model_step).

    The first refusal is the one the workflow acts on; any others ride along for the record.
    """
    first = blocks[0]
    return ApplicationError(
        f"hook {first.hook_id!r} ({first.hook}) refused message {first.message_id}: {first.reason}",
        *[b.model_dump(by_alias=True) for b in blocks],
        type=HOOK_BLOCKED,
        non_retryable=True,
    )


def _same_place(original: Message) -> Any:
    def check(value: Any) -> tuple[dict[str, Any], list[str]]:
        if not isinstance(value, dict):
            raise TypeError(f"must return a message dict or None, not {type(value).__name__}")
        message = Message.model_validate(value)
        moved = [f for f in FIXED_FIELDS if getattr(message, f) != getattr(original, f)]
        if moved:
            raise ValueError(f"may not change the message's {', '.join(moved)}")
        return message.model_dump(mode="json"), []

    return check


def _patch(current: Message) -> Any:
    def check(value: Any) -> tuple[dict[str, Any], list[str]]:
        """A returned dict replaces the update: content (text or None) and/or metadata."""
        if not isinstance(value, dict):
            raise TypeError(f"must return an update dict or None, not {type(value).__name__}")
        unknown = sorted(set(value) - set(UPDATABLE_FIELDS))
        if unknown:
            raise ValueError(f"an update may change content and metadata only, not {unknown}")
        if "content" in value and not isinstance(value["content"], str | None):
            raise TypeError("content must be a string or None")
        if "metadata" in value and not isinstance(value["metadata"], dict):
            raise TypeError("metadata must be a dict")
        return {"message": current.model_dump(mode="json"), "update": value}, []

    return check
