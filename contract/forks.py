"""Forks and rewinds of a thread (docs/time-travel.md): where a fork was taken, and why one
was refused."""

from __future__ import annotations

from pydantic import Field

from weft.contract.wire import CamelModel

# A Keyword search attribute: `WeftForkedFrom = '<source thread id>'` lists a thread's forks.
FORKED_FROM_ATTRIBUTE = "WeftForkedFrom"


class ForkLink(CamelModel):
    """Where a fork came from: its source thread and the point it was taken at."""

    thread_id: str = Field(description="the source thread")
    at_sequence: int = Field(ge=1, description="the source's last event the fork keeps")
    at_turn_id: str | None = Field(default=None, description="the turn that point ends")
    rewind: bool = Field(default=False, description="the fork took over from its source")


class ForkResult(CamelModel):
    """A started fork: its thread id and where it came from."""

    thread_id: str
    forked_from: ForkLink
    messages: int = Field(description="messages the fork starts with")


class ForkRefused(ValueError):
    """A fork point that cannot be forked at; the message names the nearest valid points."""
