"""Large messages reach the model as a preview plus a ref; `read_output` pages the rest.

The store keeps every message whole. Only the request is cut: a message over the preview
cap (a share of the model's prompt budget) is sent as its head and a notice naming its
ref and the offset to read on from, so one 5 MB tool output cannot fill the window.
Offsets are character offsets, the unit a model can count in, into the text the model
reads: the content as stored, or for a tool result its text rather than its envelope
(`activities.message_views.model_view` gives both the preview and `read_output` that
text).
"""

from __future__ import annotations

import json
import re
from typing import Any

from weft.activities.spill import message_ref
from weft.contract.context_tokens import BYTES_PER_TOKEN, estimate_tokens
from weft.contract.messages import Message

# Tokens kept free in a preview for the notice that follows the head, at least: a notice
# with long thread and message ids takes more, and is measured.
NOTICE_TOKENS = 80


def preview_message(message: Message, cap_tokens: int) -> tuple[Message, bool]:
    """`message` as the model may see it, and whether it was cut to a preview.

    A preview's content (head and notice) is estimated at no more than `cap_tokens`, unless
    the cap is too small to hold the notice itself: then the head is empty.
    """
    message, cut_calls = _cut_arguments(message, cap_tokens)
    content = message.content or ""
    if estimate_tokens(content) <= cap_tokens:
        return message, cut_calls
    ref = message_ref(message)
    # The notice names the length of the head, which is not known yet: reserve room for
    # the longest number it can name.
    reserve = max(NOTICE_TOKENS, estimate_tokens(_notice(ref, len(content), len(content))))
    head = _head(content, max(cap_tokens - reserve, 0))
    preview = {"ref": ref, "totalChars": len(content), "shownChars": len(head)}
    shown = message.model_copy(
        update={
            "content": head + _notice(ref, len(content), len(head)),
            "metadata": {**message.metadata, "preview": preview},
        }
    )
    return shown, True


def _cut_arguments(message: Message, cap_tokens: int) -> tuple[Message, bool]:
    """Tool-call arguments over the cap are replaced by a JSON note (providers need JSON)."""
    calls = message.tool_calls or []
    if not any(estimate_tokens(c.function.arguments) > cap_tokens for c in calls):
        return message, False
    kept = []
    for call in calls:
        arguments = call.function.arguments
        if estimate_tokens(arguments) > cap_tokens:
            note = (
                f"{len(arguments)} characters of arguments, too large for the context, were "
                "left out; the stored message keeps them and the call's result follows"
            )
            function = call.function.model_copy(update={"arguments": json.dumps({"weft": note})})
            call = call.model_copy(update={"function": function})
        kept.append(call)
    return message.model_copy(update={"tool_calls": kept}), True


def page_chars(cap_tokens: int) -> int:
    """The longest page `read_output` returns for a preview cap of `cap_tokens`.

    Half the cap's bytes: `read_page` keeps a page's text, JSON-escaped, within that many
    bytes, and the other half holds the tool result around it (ref and offsets, as the
    compact JSON the model reads) with room to spare. So the tool message carrying a page never exceeds the cap and is never
    itself cut to a preview, which would send the model paging through its own page.
    """
    return max(1, cap_tokens * BYTES_PER_TOKEN // 2)


def read_page(content: str, offset: int, limit: int | None, max_chars: int) -> dict[str, Any]:
    """Characters from `offset` of `content`: `limit` of them, at most `max_chars`.

    Fewer come back where characters cost more than one byte in JSON (multi-byte UTF-8,
    escaped quotes, newlines and control characters): the page's text, as a JSON string,
    stays within `max_chars` bytes (see `page_chars`). At least one character comes back
    while any is left, and `nextOffset` says where to read on (None at the end).
    """
    if offset < 0:
        raise ValueError(f"offset must be 0 or more, got {offset}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be 1 or more, got {limit}")
    if max_chars < 1:
        raise ValueError(f"max_chars must be 1 or more, got {max_chars}")
    if offset > len(content):
        raise ValueError(
            f"offset {offset} is beyond the end of the output, which has {len(content)} characters"
        )
    size = max_chars if limit is None else min(limit, max_chars)
    text = _fit_json(content[offset : offset + size], max_chars)
    end = offset + len(text)
    return {
        "text": text,
        "offset": offset,
        "returnedChars": len(text),
        "totalChars": len(content),
        "nextOffset": end if end < len(content) else None,
    }


# The notice `_notice` writes, read back to say which outputs a request carried as
# previews (`output.truncated`): the wire messages do not carry their ids otherwise.
_NOTICE = re.compile(
    r"…\[weft: this output has (\d+) characters; the model sees the first (\d+)\. "
    r"The full output is (weft://threads/[^/\s]+/messages/([^:\s]+)): call read_output"
)


def previewed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each output a request's messages carry as a preview: its ref, message id, length
    and how much of it the model sees."""
    found = []
    for message in messages:
        content = message.get("content")
        texts = [content] if isinstance(content, str) else []
        if isinstance(content, list):  # parts: a preview is a text part
            texts = [
                p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
        for text in texts:
            match = _NOTICE.search(text)
            if match is not None:
                total, shown, ref, message_id = match.groups()
                found.append(
                    {
                        "ref": ref,
                        "messageId": message_id,
                        "role": message.get("role"),
                        "totalChars": int(total),
                        "shownChars": int(shown),
                    }
                )
    return found


def _notice(ref: str, total: int, shown: int) -> str:
    # The scripted model server (workers/scripted_model/placeholders.py) parses this text.
    return (
        f"\n…[weft: this output has {total} characters; the model sees the first {shown}. "
        f'The full output is {ref}: call read_output with {{"ref": "{ref}", '
        f'"offset": {shown}}} to read on.]'
    )


def _head(content: str, tokens: int) -> str:
    """The longest prefix of `content` whose estimate is within `tokens`."""
    limit = tokens * BYTES_PER_TOKEN
    # A character is at least one byte: the first `limit` characters hold the head, so a
    # 5 MB output is not encoded whole. A character cut in two at the end is dropped.
    return content[:limit].encode("utf-8")[:limit].decode("utf-8", "ignore")


def _fit_json(text: str, budget: int) -> str:
    """The longest prefix of `text` (one character at least) within `budget` JSON bytes."""
    if _json_bytes(text) <= budget:
        return text
    low, high = 1, len(text) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if _json_bytes(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _json_bytes(text: str) -> int:
    """UTF-8 bytes of `text` as a JSON string body, escaped as pydantic and json.dumps do."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) - 2
