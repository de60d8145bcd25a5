"""Unit tests of previews: big messages cut to a head and a notice, pages of the rest."""

from __future__ import annotations

import json
import re

import pytest

from weft.activities.message_views import model_view
from weft.activities.previews import page_chars, preview_message, read_page
from weft.contract.activities import ToolResult
from weft.contract.context import ContextOptions
from weft.contract.context_tokens import ContextLimits, estimate_tokens, preview_cap_tokens
from weft.contract.messages import Message

CAP = 1_000
# The cap of a 128k model at the default preview share, as a thread would use it.
MODEL_CAP = preview_cap_tokens(
    ContextLimits(context_tokens=128_000, output_tokens=4_096).prompt_budget,
    ContextOptions().preview_share,
)
_NOTICE = re.compile(r'call read_output with \{"ref": "([^"]+)", "offset": (\d+)\}')


def stored(content: str | None, *, thread_id: str = "t1", **metadata: object) -> Message:
    return Message(
        id="m7",
        thread_id=thread_id,
        position=3,
        role="tool",
        content=content,
        created_at=0,
        metadata=dict(metadata),
    )


@pytest.mark.parametrize("content", [None, "", "short", "x" * (CAP * 4)])
def test_a_message_within_the_cap_is_left_alone(content):
    message = stored(content)
    assert preview_message(message, CAP) == (message, False)


@pytest.mark.parametrize(
    "content",
    [
        "x" * 50_000,
        "é漢🙂" * 20_000,  # 2, 3 and 4 UTF-8 bytes per character
        "ab" * 2_000 + "漢" * 30_000,  # the cut falls inside multi-byte text
    ],
    ids=["ascii", "multi-byte", "mixed"],
)
def test_a_big_message_becomes_a_preview_within_the_cap(content):
    message = stored(content, source="dump")
    shown, previewed = preview_message(message, CAP)

    assert previewed
    assert estimate_tokens(shown.content or "") <= CAP
    preview = shown.metadata["preview"]
    ref = "weft://threads/t1/messages/m7"
    assert preview == {"ref": ref, "totalChars": len(content), "shownChars": preview["shownChars"]}
    head = content[: preview["shownChars"]]
    assert (shown.content or "").startswith(head)
    # Nearly the whole cap holds the head: only the notice's share is given up.
    assert estimate_tokens(head) > CAP - 120
    # The notice names the ref and the offset to read on from, in the form models parse.
    assert _NOTICE.findall(shown.content or "") == [(ref, str(preview["shownChars"]))]
    assert f"this output has {len(content)} characters" in (shown.content or "")
    # The rest of the message is as stored; the store's copy is not touched.
    assert shown.metadata["source"] == "dump" and "preview" not in message.metadata
    assert (shown.id, shown.role, shown.position) == (message.id, message.role, message.position)
    assert message.content == content


def test_a_notice_with_long_ids_still_fits_the_cap():
    """The notice is measured, not assumed to fit in a fixed reserve."""
    message = stored("y" * 100_000, thread_id="thread-" + "a" * 300)
    shown, previewed = preview_message(message, 300)
    assert previewed and estimate_tokens(shown.content or "") <= 300
    assert _NOTICE.search(shown.content or "")


def test_a_page_is_half_the_cap_in_bytes():
    assert page_chars(1_000) == 2_000
    assert page_chars(0) == 1


def test_paging_through_five_megabytes_gives_the_content_back_exactly():
    content = ('line of log output, "quoted"\tand tabbed\n' * 40 + "naïve café 漢字 🙂\n") * 3_200
    assert len(content.encode("utf-8")) > 5_000_000
    max_chars = page_chars(MODEL_CAP)
    pages = []
    offset: int | None = 0
    while offset is not None:
        page = read_page(content, offset, None, max_chars)
        assert page["offset"] == offset and page["totalChars"] == len(content)
        assert 0 < page["returnedChars"] == len(page["text"]) <= max_chars
        pages.append(page["text"])
        offset = page["nextOffset"]
    assert "".join(pages) == content


@pytest.mark.parametrize(
    "content",
    ["x" * 200_000, "漢" * 200_000, "\n" * 200_000, '"' * 200_000, "\x01" * 200_000],
    ids=["ascii", "cjk", "newlines", "quotes", "control"],
)
def test_a_page_wrapped_as_a_tool_result_is_never_previewed_again(content):
    max_chars = page_chars(MODEL_CAP)
    ref = "weft://threads/" + "t" * 64 + "/messages/" + "m" * 64
    page = read_page(content, 1_000, None, max_chars)
    result = ToolResult(status="success", result={"ref": ref, **page})
    # What the model is sent: the result's JSON text (activities/message_views.py, model_view).
    message = model_view(stored(result.model_dump_json(exclude_none=True)))
    assert preview_message(message, MODEL_CAP) == (message, False)
    assert json.loads(message.content or "")["text"] == content[1_000 : page["nextOffset"]]


def test_a_limit_is_honoured_and_capped():
    content = "abcdefghij" * 100
    assert read_page(content, 5, 3, 50)["text"] == "fgh"
    page = read_page(content, 0, 10_000, 50)
    assert page["returnedChars"] == 50 and page["nextOffset"] == 50
    last = read_page(content, 990, 20, 50)
    assert last["text"] == "abcdefghij" and last["nextOffset"] is None


def test_reading_at_the_end_returns_an_empty_last_page():
    assert read_page("abc", 3, None, 10) == {
        "text": "",
        "offset": 3,
        "returnedChars": 0,
        "totalChars": 3,
        "nextOffset": None,
    }
    assert read_page("", 0, None, 10)["nextOffset"] is None


@pytest.mark.parametrize(
    ("offset", "limit", "problem"),
    [
        (-1, None, "offset must be 0 or more, got -1"),
        (0, 0, "limit must be 1 or more, got 0"),
        (4, None, "offset 4 is beyond the end of the output, which has 3 characters"),
    ],
)
def test_bad_offsets_and_limits_are_refused_clearly(offset, limit, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        read_page("abc", offset, limit, 10)
