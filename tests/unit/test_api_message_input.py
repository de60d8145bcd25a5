"""`POST /threads/{id}/messages` takes the `queue_message` shape (contract/messages.py
`QueuedMessage`), with only what differs over HTTP declared in api/models.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from weft.api.models import MessageInput, TurnInput
from weft.contract.messages import MAX_QUEUED_CONTENT_CHARS, QueuedMessage


def test_the_http_body_is_the_queued_message_shape() -> None:
    """Its fields are the queued message's, so a field added to one is in the other, and a
    turn's body is a message with the submit options."""
    assert issubclass(MessageInput, QueuedMessage) and issubclass(TurnInput, MessageInput)
    assert set(MessageInput.model_fields) == set(QueuedMessage.model_fields)
    http = MessageInput.model_json_schema(by_alias=True)["properties"]
    signal = QueuedMessage.model_json_schema(by_alias=True)["properties"]
    for name in ("attachments", "silent"):
        assert http[name] == signal[name]


def test_what_differs_over_http() -> None:
    """The role defaults to user, content may exceed the signal's cap (it is stored as a blob
    first), and metadata weft sets itself is refused naming the key."""
    body = MessageInput.model_validate({"content": "x" * (MAX_QUEUED_CONTENT_CHARS + 1)})
    assert body.role == "user"
    with pytest.raises(ValidationError):
        QueuedMessage.model_validate({"role": "user", "content": body.content})
    with pytest.raises(ValidationError, match="'contentRef' is set by weft itself"):
        MessageInput.model_validate({"content": "x", "metadata": {"contentRef": "blob:00"}})
