"""The built-in `read_output` tool: page through an output the model saw as a preview.

Offered by `model.call` whenever the request holds a preview (or a summary that names a
ref). It reads the stored message of this thread only, so a model cannot read another
thread's outputs by guessing a ref. It pages the text the preview was cut from: a tool
result as the model reads it (`model_view`), not its stored envelope.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from weft.activities.message_views import model_view
from weft.activities.previews import read_page
from weft.contract.activities import ToolResult
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.validation import describe_validation_error
from weft.store.protocols import HasMessages

READ_OUTPUT_SPEC: dict[str, Any] = {
    "name": READ_OUTPUT_TOOL,
    "description": (
        "Read part of an output that was shown to you only as a preview. Pass the ref from "
        "the preview's notice and the offset to read from; the reply has the text and the "
        "nextOffset to continue with (null at the end)."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "the weft://threads/... ref of the output"},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "description": "characters to read"},
        },
        "required": ["ref"],
        "additionalProperties": False,
    },
}
_REF = re.compile(r"^weft://threads/(?P<thread>[^/]+)/messages/(?P<message>[^/]+)$")


class ReadOutputArgs(BaseModel):
    """The tool's arguments, validated strictly so a wrong one is named in the error."""

    model_config = ConfigDict(extra="forbid")

    ref: str = Field(min_length=1)
    offset: int = Field(default=0, ge=0)
    limit: int | None = Field(default=None, ge=1)


async def read_output(
    store: HasMessages, thread_id: str, raw_args: dict[str, Any], max_chars: int
) -> ToolResult:
    """One page of a stored output of `thread_id`, or an error result saying what is wrong."""
    try:
        args = ReadOutputArgs.model_validate(raw_args)
    except ValidationError as err:
        return _error("invalid_arguments", f"read_output: {describe_validation_error(err)}")
    match = _REF.match(args.ref)
    if match is None:
        return _error(
            "invalid_ref",
            f"read_output: {args.ref!r} is not an output ref "
            "(expected weft://threads/<thread>/messages/<message>)",
        )
    if match["thread"] != thread_id:
        return _error("forbidden_ref", "read_output: that ref belongs to another thread")
    message = await asyncio.to_thread(store.messages.get, thread_id, match["message"])
    if message is None:
        return _error("unknown_ref", f"read_output: no stored output at {args.ref}")
    try:
        page = read_page(model_view(message).content or "", args.offset, args.limit, max_chars)
    except ValueError as err:
        return _error("invalid_arguments", f"read_output: {err}")
    return ToolResult(status="success", result={"ref": args.ref, **page})


def _error(code: str, message: str) -> ToolResult:
    return ToolResult(status="error", error=message, error_code=code)
