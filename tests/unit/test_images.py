"""Image attachments in a request: sent to models that see images, recent ones only."""

from __future__ import annotations

import base64
from typing import Any

from weft.activities.images import MAX_IMAGE_BYTES, ImageView
from weft.activities.message_views import project_messages
from weft.contract.messages import Message

PNG = b"\x89PNG\r\n\x1a\nfake"
FILES = {"/attachments/cat.png": PNG, "/attachments/big.jpg": b"x" * (MAX_IMAGE_BYTES + 1)}


def _view(*, sees: bool = True, recent: int = 10) -> ImageView:
    return ImageView(model="m", sees_images=sees, recent=recent, load=FILES.get)


def _user(position: int, *attachments: str, content: str = "look") -> Message:
    return Message(
        id=f"m{position}",
        thread_id="t1",
        position=position,
        role="user",
        content=content,
        created_at=0,
        attachments=list(attachments),
    )


def _content(messages: list[Message], view: ImageView | None) -> list[Any]:
    return [m["content"] for m in project_messages(messages, side="a", dual=False, images=view)]


def test_a_recent_image_is_sent_as_an_image_part_with_its_path_in_the_text() -> None:
    """A model that sees images gets the bytes as a data URL and still reads the path."""
    [content] = _content([_user(0, "/attachments/cat.png", "/attachments/notes.txt")], _view())
    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert content == [
        {
            "type": "text",
            "text": "look\n\n[attachments: /attachments/cat.png, /attachments/notes.txt]",
        },
        {"type": "image_url", "image_url": {"url": url}},
    ]


def test_a_model_without_images_gets_a_placeholder() -> None:
    """supportsImages: false leaves image parts out and says so, naming the path."""
    [content] = _content([_user(0, "/attachments/cat.png")], _view(sees=False))
    assert content == (
        "look\n\n[attachments: /attachments/cat.png]\n"
        "[image /attachments/cat.png not shown: model 'm' does not take images]"
    )


def test_images_older_than_the_threshold_become_placeholders() -> None:
    """With recentImageThreshold 2, only the last two messages keep their images."""
    messages = [_user(i, "/attachments/cat.png", content=f"m{i}") for i in range(4)]
    contents = _content(messages, _view(recent=2))
    assert [isinstance(c, list) for c in contents] == [False, False, True, True]
    assert contents[0].endswith(
        "[image /attachments/cat.png not shown: older than the last 2 messages]"
    )


def test_missing_and_oversized_images_are_named_not_sent() -> None:
    """A path with no file, or a file over the image limit, becomes a placeholder."""
    [content] = _content([_user(0, "/attachments/gone.png", "/attachments/big.jpg")], _view())
    assert "[image /attachments/gone.png not shown: no such file in this thread]" in content
    assert f"over the {MAX_IMAGE_BYTES}-byte image limit" in content
    assert isinstance(content, str)


def test_without_a_view_attachments_stay_text() -> None:
    """Requests built without a view (compaction) and non-image files keep the path list."""
    assert _content([_user(0, "/attachments/cat.png")], None) == [
        "look\n\n[attachments: /attachments/cat.png]"
    ]
    assert _content([_user(0, "/attachments/a.txt")], _view()) == [
        "look\n\n[attachments: /attachments/a.txt]"
    ]
