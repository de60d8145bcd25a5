"""Context assembly (Runtime §4): the system prompt and the side's view of the transcript."""

from __future__ import annotations

import json
from typing import Any

from weft.activities.images import ImageView, user_content
from weft.contract.activities import ToolResult
from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.contract.messages import Message, Side
from weft.contract.thread_env import EnvEntry, model_visible


def render_prompt(prompt: PromptDef, snapshot: DefinitionSnapshot, env: dict[str, EnvEntry]) -> str:
    """The system prompt text; env parts show only non-secret values."""
    if isinstance(prompt.prompt, str):
        return prompt.prompt
    pieces = []
    for part in prompt.prompt:
        if part.type == "text":
            pieces.append(part.content or "")
        elif part.type == "include" and part.prompt in snapshot.prompts:
            pieces.append(render_prompt(snapshot.prompts[part.prompt], snapshot, env))
        elif part.type == "env" and part.property:
            pieces.append(model_visible(env, part.property))
    return "".join(pieces)


def project_messages(
    messages: list[Message], *, side: Side, dual: bool, images: ImageView | None = None
) -> list[dict[str, Any]]:
    """OpenAI-shaped history as `side` sees it.

    In `dual_ai`, a side sees its own messages as `assistant` and the other side's text as
    `user`, and never the other side's tool calls or results. With `images`, a user
    message's image attachments are sent as image parts (activities/images.py).
    """
    first_recent = len(messages) - images.recent if images else 0
    projected = (
        project_message(m, side=side, dual=dual, images=images, recent=i >= first_recent)
        for i, m in enumerate(messages)
    )
    return [entry for entry in projected if entry is not None]


def project_message(
    message: Message,
    *,
    side: Side,
    dual: bool,
    images: ImageView | None = None,
    recent: bool = False,
) -> dict[str, Any] | None:
    """One message as `side` sees it (see `project_messages`); None when it sees nothing.

    `recent` says whether a user message is among the last ones whose images are sent.
    """
    own = not dual or message.side in (side, None)
    if message.role == "assistant":
        if own:
            return _assistant(message)
        return {"role": "user", "content": message.content} if message.content else None
    if message.role == "tool":
        if not own:
            return None
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content or "",
        }
    if message.role == "user":
        content = user_content(message, _with_attachments(message), images, recent=recent)
        return {"role": "user", "content": content}
    return {"role": message.role, "content": _with_attachments(message)}


def projection_is_fixed(message: Message) -> bool:
    """Whether the message projects the same way whatever images a request sends: only a
    user message with attachments may carry image parts."""
    return message.role != "user" or not message.attachments


def model_view(message: Message) -> Message:
    """`message` as the model reads it: a tool message's stored envelope becomes its text
    (`tool_result_text`); any other message is returned as it is.

    Previews are cut from this view and `read_output` pages it, so a preview's offsets are
    offsets into the text the model saw (docs/tool-results.md).
    """
    if message.role != "tool" or not message.content:
        return message
    text = tool_message_text(message.content)
    return message if text == message.content else message.model_copy(update={"content": text})


def tool_message_text(content: str) -> str:
    """The model's text for a stored tool message's content; content that is not a
    `ToolResult` envelope (none that weft writes) is sent as it is."""
    try:
        result = ToolResult.model_validate_json(content)
    except ValueError:
        return content
    return tool_result_text(result)


def tool_result_text(result: ToolResult) -> str:
    """What the model reads of a tool result, instead of the stored envelope.

    A success is its `result`: a string as it is (the empty string as `""`, so a tool
    message is never empty), anything else as compact JSON. An error is `Error (code):
    message`, then its `error_data` and any partial `result` as compact JSON, a line each;
    never the stack. Attachments, of either, follow on a line naming their paths.
    """
    if result.status == "success":
        value = result.result
        text = value if isinstance(value, str) and value else _compact(value)
    else:
        head = f"Error ({result.error_code})" if result.error_code else "Error"
        lines = [f"{head}: {result.error or 'the tool failed'}"]
        lines += [_compact(v) for v in (result.error_data, result.result) if v is not None]
        text = "\n".join(lines)
    if result.attachments:
        text += "\n\n[attachments: " + ", ".join(result.attachments) + "]"
    return text


def _compact(value: Any) -> str:
    # As the store's JSON: no spaces, non-ASCII text as it is (cheaper than \u escapes).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _assistant(message: Message) -> dict[str, Any]:
    entry: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [c.model_dump() for c in message.tool_calls]
    signature = message.metadata.get("reasoningSignature")
    if signature and message.reasoning_content:
        # Anthropic needs its signed thinking back in a tool-use turn; other adapters drop it.
        entry["thinking"] = {"text": message.reasoning_content, "signature": signature}
    return entry


def _with_attachments(message: Message) -> str:
    # Attachments are files of the thread's filesystem: the model is always told their
    # paths (the images among them may also go as image parts, see activities/images.py).
    text = message.content or ""
    if message.attachments:
        text += "\n\n[attachments: " + ", ".join(message.attachments) + "]"
    return text
