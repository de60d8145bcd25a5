"""Narrow views of the thread's memory that its parts are handed instead of all of it.

`ThreadMemory` satisfies each of them structurally; a part declares, in its own module,
a view that adds the fields it needs to these: a plain attribute is one the part assigns,
a property one it only reads (or changes in place: a book, a queue). "Who assigns X" is
answered by the views that name X as an attribute.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.messages import Message, Role, Side
from weft.contract.thread import StopReason, ThreadStartInput, ThreadStatus
from weft.workflows.history_gauge import HistoryGauge


class Facts(Protocol):
    """Writing the thread's facts: events, incidents, ids and workflow time."""

    def emit(self, event_type: str, payload: Any = None, **ids: Any) -> Event: ...

    def new_id(self, prefix: str) -> str: ...

    def now(self) -> datetime: ...

    def timestamp(self) -> str: ...

    def incident(self, code: str, message: str, **ids: Any) -> dict[str, Any]: ...

    def warn(self, code: str, signal: str, message: str) -> None: ...

    def is_terminated(self) -> bool: ...


class Transcript(Protocol):
    """Adding messages the workflow writes by itself (positions are the workflow's)."""

    @property
    def outbox_messages(self) -> list[Message]: ...

    def new_message(
        self,
        *,
        role: Role,
        content: str | None,
        side: Side | None,
        turn_id: str | None,
        message_id: str | None = None,
        **fields: Any,
    ) -> Message: ...

    def reserve_position(self) -> int:
        """Claim the next message position for a message an activity will write."""
        ...

    def index_message(self, message: Message) -> None: ...


class Terminated(Facts, Protocol):
    """Refusing what arrives after terminate says when it was."""

    @property
    def terminated_at(self) -> str | None: ...


class Pending(Protocol):
    """The events and messages waiting for the next activity to write them."""

    def take_outbox(self) -> list[Event]: ...

    def take_outbox_messages(self) -> list[Message]: ...

    def return_outbox(self, events: list[Event]) -> None: ...

    def return_messages(self, messages: list[Message]) -> None: ...


class Starts(Protocol):
    """Starting a step's activity: the thread's options and its history gauge."""

    @property
    def start(self) -> ThreadStartInput: ...

    @property
    def history(self) -> HistoryGauge: ...


class Identity(Protocol):
    """Which thread this is, and what it was started with."""

    @property
    def thread_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def start(self) -> ThreadStartInput: ...


class AgentInForce(Protocol):
    """Which definitions, agent and side the thread runs now, and its status (read-only)."""

    @property
    def snapshot(self) -> DefinitionSnapshot | None: ...

    @property
    def active_agent(self) -> str | None: ...

    @property
    def active_side(self) -> Side | None: ...

    @property
    def active_turn(self) -> str | None: ...

    @property
    def status(self) -> ThreadStatus: ...


class Stopped(Protocol):
    """Why the latest turn or session stopped, and how (read-only here)."""

    @property
    def stop_reason(self) -> StopReason | None: ...

    @property
    def last_outcome(self) -> str | None: ...
