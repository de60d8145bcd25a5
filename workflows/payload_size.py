"""Payload sizes, estimated before anything is scheduled.

Temporal refuses a payload over 2 MB by failing the workflow task, and the task then
fails the same way forever (TMPRL1103). So the thread measures what it is about to send
(deterministically: the pydantic JSON it encodes to) and turns an oversized payload into
a typed error naming what was too big.
"""

from __future__ import annotations

from pydantic import BaseModel


def encoded_size(value: BaseModel) -> int:
    """Bytes of `value` as the pydantic data converter encodes it (JSON, UTF-8)."""
    return len(value.model_dump_json(by_alias=True).encode("utf-8"))


def megabytes(size: int) -> str:
    """A size for error texts: `1.62 MB`."""
    return f"{size / 1_000_000:.2f} MB"
