"""Context assembly (Runtime §4): the system prompt and the side's view of the transcript."""

from __future__ import annotations

from typing import Any

from activities.images import ImageView, user_content
from contract.definitions import DefinitionSnapshot, PromptDef
from contract.messages import Message, Side
from contract.thread_env import EnvEntry, model_visible


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
    out: list[dict[str, Any]] = []
    first_recent = len(messages) - images.recent if images else 0
    for index, message in enumerate(messages):
        own = not dual or message.side in (side, None)
        if message.role == "assistant":
            if own:
                out.append(_assistant(message))
            elif message.content:
                out.append({"role": "user", "content": message.content})
        elif message.role == "tool":
            if own:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": message.tool_call_id,
                        "content": message.content or "",
                    }
                )
        elif message.role == "user":
            recent = index >= first_recent
            content = user_content(message, _with_attachments(message), images, recent=recent)
            out.append({"role": "user", "content": content})
        else:
            out.append({"role": message.role, "content": _with_attachments(message)})
    return out


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
