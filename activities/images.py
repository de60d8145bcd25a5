"""Image attachments in a request (Runtime §4, Model `capabilities.supportsImages`).

A user message's attachments are paths in the thread's filesystem. The model is always told
the paths; an attachment that is an image is also sent as an image content part when:
- the model can see images (`capabilities.supportsImages` is not false: unknown means try);
- the message is one of the last `recentImageThreshold` messages of the request (prompt,
  default 10): older images become a one-line placeholder naming the path, so a long
  thread does not pay for every picture it ever saw;
- the file exists and is at most `MAX_IMAGE_BYTES` (what Anthropic takes per image).
Nothing here changes what is stored: the message keeps its attachments either way. A
request's `ImageView` is made with its window (`context_window.image_view`).
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from weft.contract.messages import Message

# The image types every provider weft speaks to accepts as content parts.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class ImageView:
    """How the image attachments of one request are shown."""

    model: str
    sees_images: bool
    recent: int
    load: Callable[[str], bytes | None]


def image_type(path: str) -> str | None:
    """The image MIME type of `path` from its extension, or None when it is no image."""
    guessed, _ = mimetypes.guess_type(path)
    return guessed if guessed in IMAGE_TYPES else None


def user_content(
    message: Message, text: str, view: ImageView | None, *, recent: bool
) -> str | list[dict[str, Any]]:
    """The content of a user message: `text` (which names every attachment), plus an image
    part per image attachment the view sends, or a placeholder line for one it does not."""
    images = [(path, kind) for path in message.attachments if (kind := image_type(path))]
    if view is None or not images:
        return text
    parts: list[dict[str, Any]] = []
    notes: list[str] = []
    for path, kind in images:
        data, why = _image(view, path, recent=recent)
        if data is None:
            notes.append(f"[image {path} not shown: {why}]")
        else:
            url = f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    shown = "\n".join([text, *notes]) if notes else text
    if not parts:
        return shown
    return [{"type": "text", "text": shown}, *parts]


def _image(view: ImageView, path: str, *, recent: bool) -> tuple[bytes | None, str]:
    if not view.sees_images:
        return None, f"model {view.model!r} does not take images"
    if not recent:
        return None, f"older than the last {view.recent} messages"
    data = view.load(path)
    if data is None:
        return None, "no such file in this thread"
    if len(data) > MAX_IMAGE_BYTES:
        return None, f"{len(data)} bytes, over the {MAX_IMAGE_BYTES}-byte image limit"
    return data, ""
