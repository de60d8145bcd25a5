"""Model providers on plain httpx: OpenAI Chat Completions and Anthropic Messages adapters.

Retries belong to Temporal, so the adapters never retry; every failure leaves as an
`ApplicationError` classified in `errors.py`.
"""

from weft.activities.providers.anthropic_messages import AnthropicMessagesProvider
from weft.activities.providers.base import ChatProvider, ChatReply, ChatRequest, Delta, Usage
from weft.activities.providers.errors import classify_http_error, parse_retry_after
from weft.activities.providers.openai_chat import OpenAIChatProvider

__all__ = [
    "AnthropicMessagesProvider",
    "ChatProvider",
    "ChatReply",
    "ChatRequest",
    "Delta",
    "OpenAIChatProvider",
    "Usage",
    "classify_http_error",
    "parse_retry_after",
]
