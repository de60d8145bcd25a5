"""Unit tests of the built-in `read_output` tool over an in-memory message store."""

from __future__ import annotations

import pytest
from store_doubles import MemoryStore

from weft.activities.read_output import READ_OUTPUT_SPEC, read_output
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.messages import Message

CONTENT = "0123456789" * 50 + "é漢🙂"
MAX_CHARS = 200


@pytest.fixture
def store() -> MemoryStore:
    store = MemoryStore()
    store.messages.append(
        [
            Message(
                id="big", thread_id="t1", position=0, role="tool", content=CONTENT, created_at=0
            ),
            Message(id="empty", thread_id="t1", position=1, role="assistant", created_at=1),
            Message(
                id="theirs", thread_id="t2", position=0, role="tool", content="x", created_at=2
            ),
        ]
    )
    return store


REF = "weft://threads/t1/messages/big"


def test_the_spec_offers_ref_offset_and_limit():
    assert READ_OUTPUT_SPEC["name"] == READ_OUTPUT_TOOL
    parameters = READ_OUTPUT_SPEC["parameters"]
    assert parameters["required"] == ["ref"]
    assert set(parameters["properties"]) == {"ref", "offset", "limit"}


async def test_a_page_of_this_threads_output(store):
    result = await read_output(store, "t1", {"ref": REF, "offset": 10, "limit": 5}, MAX_CHARS)
    assert result.status == "success"
    assert result.result == {
        "ref": REF,
        "text": "01234",
        "offset": 10,
        "returnedChars": 5,
        "totalChars": len(CONTENT),
        "nextOffset": 15,
    }


async def test_pages_default_to_and_are_capped_at_max_chars(store):
    first = await read_output(store, "t1", {"ref": REF}, MAX_CHARS)
    assert first.result["offset"] == 0 and first.result["returnedChars"] == MAX_CHARS
    capped = await read_output(store, "t1", {"ref": REF, "limit": 10_000}, MAX_CHARS)
    assert capped.result["returnedChars"] == MAX_CHARS
    last = await read_output(store, "t1", {"ref": REF, "offset": 500}, MAX_CHARS)
    assert last.result["text"] == "é漢🙂" and last.result["nextOffset"] is None


async def test_a_message_without_content_reads_as_empty(store):
    ref = "weft://threads/t1/messages/empty"
    result = await read_output(store, "t1", {"ref": ref}, MAX_CHARS)
    assert result.status == "success" and result.result["text"] == ""


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        ({}, "invalid_arguments", "field 'ref'"),
        ({"ref": REF, "offset": -1}, "invalid_arguments", "field 'offset'"),
        ({"ref": REF, "limit": 0}, "invalid_arguments", "field 'limit'"),
        ({"ref": REF, "offset": "soon"}, "invalid_arguments", "field 'offset'"),
        ({"ref": REF, "page": 2}, "invalid_arguments", "field 'page'"),
        ({"ref": "weft://threads/t2/messages/theirs"}, "forbidden_ref", "another thread"),
        ({"ref": "msg_123"}, "invalid_ref", "'msg_123' is not an output ref"),
        ({"ref": REF + "/more"}, "invalid_ref", "is not an output ref"),
        ({"ref": "weft://threads/t1/messages/ghost"}, "unknown_ref", "no stored output"),
        ({"ref": REF, "offset": 10_000}, "invalid_arguments", "offset 10000 is beyond the end"),
    ],
    ids=[
        "no-ref",
        "negative-offset",
        "zero-limit",
        "offset-not-a-number",
        "unknown-argument",
        "foreign-ref",
        "malformed-ref",
        "ref-with-a-tail",
        "unknown-message",
        "offset-beyond-the-end",
    ],
)
async def test_what_is_wrong_is_an_error_result(store, args, code, fragment):
    result = await read_output(store, "t1", args, MAX_CHARS)
    assert result.status == "error" and result.error_code == code
    assert fragment in (result.error or "")
    assert (result.error or "").startswith("read_output: ")
