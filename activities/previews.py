"""Large messages reach the model as a preview plus a ref; `read_output` pages the rest.

The store keeps every message whole. Only the request is cut: a message over the preview
cap (a share of the model's prompt budget) is sent as its head and a notice naming its
ref and the offset to read on from, so one 5 MB tool output cannot fill the window.
"""

from __future__ import annotations

from typing import Any

from activities.spill import message_ref
from contract.context_budget import BYTES_PER_TOKEN, estimate_tokens
from contract.messages import Message

# Tokens kept free in a preview for the notice that follows the head.
NOTICE_TOKENS = 80


def preview_message(message: Message, cap_tokens: int) -> tuple[Message, bool]:
    """`message` as the model may see it, and whether it was cut to a preview."""
    content = message.content or ""
    if estimate_tokens(content) <= cap_tokens:
        return message, False
    head = _head(content, max(cap_tokens - NOTICE_TOKENS, 1))
    ref = message_ref(message)
    notice = (
        f"\n…[weft: this output has {len(content)} characters; the model sees the first "
        f'{len(head)}. The full output is {ref}: call read_output with {{"ref": "{ref}", '
        f'"offset": {len(head)}}} to read on.]'
    )
    preview = {"ref": ref, "totalChars": len(content), "shownChars": len(head)}
    shown = message.model_copy(
        update={"content": head + notice, "metadata": {**message.metadata, "preview": preview}}
    )
    return shown, True


def page_chars(cap_tokens: int) -> int:
    """The longest page `read_output` returns for a preview cap of `cap_tokens`.

    Half the cap in characters: a page travels back as a JSON tool result (escaping can
    double some characters), and must not itself exceed the cap and be previewed again.
    """
    return max(1, cap_tokens * BYTES_PER_TOKEN // 2)


def read_page(content: str, offset: int, limit: int | None, max_chars: int) -> dict[str, Any]:
    """Characters `offset` to `offset + limit` of `content` (limit capped at `max_chars`)."""
    if offset < 0:
        raise ValueError(f"offset must be 0 or more, got {offset}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be 1 or more, got {limit}")
    if offset > len(content):
        raise ValueError(f"offset {offset} is beyond the end of the output ({len(content)} chars)")
    size = min(limit or max_chars, max_chars)
    text = content[offset : offset + size]
    end = offset + len(text)
    return {
        "text": text,
        "offset": offset,
        "returnedChars": len(text),
        "totalChars": len(content),
        "nextOffset": end if end < len(content) else None,
    }


def _head(content: str, tokens: int) -> str:
    """The longest prefix of `content` whose estimate is within `tokens`."""
    data = content.encode("utf-8")[: tokens * BYTES_PER_TOKEN]
    return data.decode("utf-8", "ignore")
