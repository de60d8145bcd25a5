"""`GET /threads/{thread_id}/events`: a thread's stored events, as Server-Sent Events or as a
long poll (the contract for clients is docs/event-stream.md).

Both forms read the store from a cursor (`sequence > cursor`, in order): a thread's writers
hold its lock until they commit, so sequences become visible in order and a reader that
moves its cursor to the last event it sent can neither skip nor repeat one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field
from temporalio.client import WorkflowExecutionStatus

from weft.api.context import ApiContext, thread_status
from weft.api.gateway.app import GatewayError
from weft.api.gateway.models import ErrorBody
from weft.contract.events import Event
from weft.store.history import ThreadLinks

EVENTS_PATH = "/threads/{thread_id}/events"
# Silence longer than this gets a comment line, so proxies and clients keep the stream open;
# each one also asks Temporal whether the thread closed without a word (a hard terminate).
HEARTBEAT_SECONDS = 15.0
# After an event that says the thread is closing, closure is checked this soon, then less often.
CLOSING_CHECK_SECONDS = 0.25
RETRY_MS = 1000
# Sequences and cursors stay exact in JavaScript numbers.
MAX_SEQUENCE = 2**53 - 1
# The parameters of an event feed (a thread's log, a task's): one definition for each route.
AfterParam = Annotated[
    int, Query(ge=0, le=MAX_SEQUENCE, description="the last sequence already seen")
]
WaitParam = Annotated[
    float,
    Query(
        ge=0,
        le=60,
        allow_inf_nan=False,
        description="long poll: seconds to wait for a first event",
    ),
]
LimitParam = Annotated[
    int, Query(ge=1, le=500, description="long poll: the most events in one reply")
]
LastEventIdParam = Annotated[
    int | None,
    Header(
        alias="Last-Event-ID",
        ge=0,
        le=MAX_SEQUENCE,
        description="stream: resume after this sequence (wins over `after`)",
    ),
]
# The thread statuses a closing thread announces in its last events (workflows/agent_thread.py).
_CLOSED_STATUSES = frozenset({"cancelled", "completed", "failed"})
# The events that end a task's log (its `TaskRun` closes after writing one).
TASK_ENDINGS = frozenset({"task.completed", "task.failed", "task.timed_out", "task.cancelled"})


class EventPage(BaseModel):
    """A long poll's reply."""

    events: list[Event] = Field(description="stored events after `after`, in sequence order")
    cursor: int = Field(
        description="the sequence of the last event here (`after` when there is none): "
        "the next poll's `after`"
    )
    closed: bool = Field(
        description="the thread has closed and no event follows `cursor`: stop polling"
    )


SSE_DESCRIPTION = (
    "With `Accept: text/event-stream`: `retry`, then one message per event (`id` its "
    "sequence, `event` its type, `data` the event JSON), `: keep-alive` comments in silence, "
    'and a last `end` event (`data` {"sequence": last}) once the thread has closed. '
    "Otherwise the long-poll page as JSON."
)


def router(ctx: ApiContext) -> APIRouter:
    """The event stream routes over `ctx`."""
    routes = APIRouter(tags=["events"])

    @routes.get(
        EVENTS_PATH,
        response_model=EventPage,
        responses={
            200: {
                "description": SSE_DESCRIPTION,
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **{status: {"model": ErrorBody} for status in (401, 403, 404, 422, 503)},
        },
        summary="A thread's events: Server-Sent Events, or a long poll as JSON",
    )
    async def thread_events(
        request: Request,
        thread_id: str,
        after: AfterParam = 0,
        wait: WaitParam = 0,
        limit: LimitParam = 100,
        last_event_id: LastEventIdParam = None,
    ) -> Any:
        status = await thread_status(ctx, thread_id)
        closed = status != WorkflowExecutionStatus.RUNNING
        return await events_reply(
            ctx, request, thread_id, after, wait, limit, last_event_id, closed=closed
        )

    return routes


async def events_reply(
    ctx: ApiContext,
    request: Request,
    log_id: str,
    after: int,
    wait: float,
    limit: int,
    last_event_id: int | None,
    *,
    closed: bool,
) -> Response:
    """The stream or the long-poll page of the log `log_id` (a thread's, or a task's under
    its id), whose workflow had `closed` before anything was read."""
    if "text/event-stream" in request.headers.get("accept", ""):
        cursor = after if last_event_id is None else last_event_id
        return StreamingResponse(
            _stream(ctx, log_id, cursor, closed=closed),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    page = await _page(ctx, log_id, after, wait=0 if closed else wait, limit=limit, closed=closed)
    # Written by hand, not by the response model: events go out as `Event.to_wire`, the
    # one form the schema accepts (an unset id is left out; `null` is not a string).
    return JSONResponse(
        {
            "events": [e.to_wire() for e in page.events],
            "cursor": page.cursor,
            "closed": page.closed,
        }
    )


async def _page(
    ctx: ApiContext, thread_id: str, after: int, *, wait: float, limit: int, closed: bool
) -> EventPage:
    """The long poll: what follows `after` as soon as there is something, or `[]` after `wait`."""
    page = (await ctx.feed.wait_for_events(thread_id, after, wait))[:limit]
    cursor = _sequence(page[-1]) if page else after
    # `closed` was learnt before reading, so every event of the closed thread was readable.
    if closed:
        last = await asyncio.to_thread(ctx.store.events.last_sequence, thread_id)
        closed = last <= cursor
        # An `after` past the end of a closed thread: answer its real last event, never a
        # sequence that does not exist and never will.
        cursor = min(cursor, last)
    return EventPage(events=page, cursor=cursor, closed=closed)


async def _stream(
    ctx: ApiContext, thread_id: str, cursor: int, *, closed: bool
) -> AsyncIterator[str]:
    """The SSE body: every event after `cursor` once, in order, until the thread has closed
    and all of its events are sent. A client that leaves cancels this at its next await."""
    loop = asyncio.get_running_loop()
    yield f"retry: {RETRY_MS}\n\n"
    last_sent = loop.time()
    check_after = HEARTBEAT_SECONDS
    while True:
        # Once the thread is known closed (learnt before this read), drain without waiting.
        batch = await ctx.feed.wait_for_events(thread_id, cursor, 0 if closed else check_after)
        if batch:
            yield "".join(_message(event) for event in batch)
            cursor, last_sent = _sequence(batch[-1]), loop.time()
            if any(announces_close(event) for event in batch):
                check_after = CLOSING_CHECK_SECONDS
            continue
        if closed:
            yield await _end(ctx, thread_id, cursor)
            return
        # Quiet: the workflow may have closed (its last events are all stored by then).
        closed = await _has_closed(ctx, thread_id)
        if closed:
            continue
        check_after = min(check_after * 2, HEARTBEAT_SECONDS)
        if loop.time() - last_sent >= HEARTBEAT_SECONDS:
            yield ": keep-alive\n\n"
            last_sent = loop.time()


async def _end(ctx: ApiContext, thread_id: str, cursor: int) -> str:
    """The `end` message: the last event sent, or the thread's last one when the client
    started past it (`?after=` beyond the end), so its `id` is always a real event; none
    for a thread with no event at all."""
    last = min(cursor, await asyncio.to_thread(ctx.store.events.last_sequence, thread_id))
    # A rewound thread tells its followers where it went on (docs/time-travel.md).
    successor = (await asyncio.to_thread(ThreadLinks(ctx.store.database).get, thread_id))[1]
    data = json.dumps({"sequence": last, **({"successorThreadId": successor} if successor else {})})
    return f"id: {last}\nevent: end\ndata: {data}\n\n" if last else f"event: end\ndata: {data}\n\n"


async def _has_closed(ctx: ApiContext, thread_id: str) -> bool:
    """Whether the thread's workflow has closed; a Temporal hiccup mid-stream is not a
    reason to end it (the next quiet spell asks again)."""
    try:
        return await thread_status(ctx, thread_id) != WorkflowExecutionStatus.RUNNING
    except GatewayError as error:
        return error.status == 404  # gone from Temporal (retention): nothing more will come


def _message(event: Event) -> str:
    # json.dumps escapes line breaks inside strings, so `data` is always a single line.
    data = json.dumps(event.to_wire(), separators=(",", ":"))
    return f"id: {event.sequence}\nevent: {event.type}\ndata: {data}\n\n"


def announces_close(event: Event) -> bool:
    """A closing thread writes its final status (`thread.updated`, then the `thread_read`
    snapshot) last, a task its ending; the stream then asks Temporal soon, instead of at the
    next heartbeat."""
    if event.type in TASK_ENDINGS:  # a task's run ends right after its last event
        return True
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.type == "snapshot.updated":
        read = payload.get("threadRead")
        payload = read if isinstance(read, dict) else {}
    elif event.type != "thread.updated":
        return False
    return payload.get("status") in _CLOSED_STATUSES


def _sequence(event: Event) -> int:
    if event.sequence is None:  # every event read from the store is numbered
        raise ValueError(f"event {event.event_id} has no sequence")
    return event.sequence


__all__ = ["EVENTS_PATH", "SSE_DESCRIPTION", "EventPage", "events_reply", "router"]
