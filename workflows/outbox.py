"""Writing what the workflow produced by itself (events, messages, the thread row).

`Outbox` is the part the others are handed to write; it takes what is pending, and reads
the thread row and what the Temporal UI's details show.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from weft.contract.activities import ACTIVITY_STORE_FLUSH, FlushInput
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.workflows import ui_summaries
from weft.workflows.ui_summaries import DetailsShown
from weft.workflows.views import Pending


class OutboxView(Pending, DetailsShown, Protocol):
    """What the outbox takes to write, and the summaries of the thread it writes beside."""

    @property
    def thread_id(self) -> str: ...

    def thread_row(self) -> dict[str, Any]: ...


class Outbox:
    """Writes what the workflow produced by itself, for the parts that need it written."""

    def __init__(self, mem: OutboxView) -> None:
        self._mem = mem

    async def flush(self, *, with_thread_row: bool = False) -> None:
        """Write what the workflow produced by itself (events, messages) with a local
        activity. `with_thread_row` also writes the thread's read-model row.
        """
        mem = self._mem
        events, messages = mem.take_outbox(), mem.take_outbox_messages()
        thread_row = mem.thread_row() if with_thread_row else None
        if not events and not messages and thread_row is None:
            return
        try:
            await self._write(events, messages, thread_row)
        except ActivityError:
            # Keep them for the next activity rather than lose them.
            mem.return_outbox(events)
            mem.return_messages(messages)
            raise

    async def settle(self) -> None:
        """Write the thread's read-model row with a regular activity, not a local one: what
        a run waits on last before it decides to continue as new.

        The run then decides in the workflow task that this activity's completion started,
        with every signal that came before it, in the same order on a replay. Deciding
        right after a local activity lost queued messages: a local activity can end in a
        workflow task of its own, with no new history event; the run continued as new
        there while signals arrived, Temporal refused it (UnhandledCommand), and the task
        that followed continued as new without the messages those signals had queued
        (ARCHITECTURE "Long threads"). Only the row goes: the outbox stays for a local
        activity, whose input never enters history.
        """
        mem = self._mem
        self.show_details()
        await workflow.execute_activity(
            ACTIVITY_STORE_FLUSH,
            FlushInput(
                thread_id=mem.thread_id, events=[], messages=[], thread_row=mem.thread_row()
            ),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            summary="settle the thread row before continue-as-new",
        )

    async def persist_first(self, events: list[Event], messages: list[Message]) -> None:
        """Write messages and events now, so the activity scheduled next need not carry them.

        A local activity's input never reaches Temporal history, so this has no payload
        limit: it is how many large queued messages reach the store without an oversized
        payload.
        """
        await self._write(events, messages, None)

    def show_details(self) -> None:
        """Refresh what the Temporal UI shows as the thread's current details.

        Called where the thread writes or starts a step's activity, which follows every
        state change worth showing; it sets a value Temporal's metadata query reads, adding
        no command.
        """
        workflow.set_current_details(ui_summaries.current_details(self._mem))

    async def _write(
        self,
        events: list[Event],
        messages: list[Message],
        thread_row: dict[str, Any] | None,
    ) -> None:
        self.show_details()
        await workflow.execute_local_activity(
            ACTIVITY_STORE_FLUSH,
            FlushInput(
                thread_id=self._mem.thread_id,
                events=events,
                messages=messages,
                thread_row=thread_row,
            ),
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
            summary=ui_summaries.store_flush(
                len(events), len(messages), thread_row=thread_row is not None
            ),
        )
