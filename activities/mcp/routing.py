"""Sharing one MCP session between calls, and taking a server's elicitation to its caller.

The SDK does not say which call an `elicitation/create` belongs to: the server's
`related_request_id` only steers its HTTP transport and never reaches the client. So a
call that can answer elicitations (it has a handler) holds its session alone (`CallGate`),
and any elicitation that arrives meanwhile is that call's; meanwhile the pool gives other
calls another session of the same server and env. Alone is also what the SDK needs: it
answers an elicitation inside its receive loop, so a session waiting for a person reads
no other reply. Calls without a handler share a session; an elicitation during one is
declined (no call could take it to a person).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types

from weft.activities.mcp.types import ElicitationHandler
from weft.contract.mcp import ElicitationAnswer

ElicitReply = types.ElicitResult | types.ErrorData


class CallGate:
    """Shared use for calls that cannot be asked anything, sole use for those that can.

    A waiting sole user holds back new shared users, so it is never starved.
    """

    def __init__(self) -> None:
        self._shared = 0
        self._sole = False
        self._sole_waiting = 0
        self._changed = anyio.Event()

    async def acquire(self, *, sole: bool) -> None:
        if sole:
            self._sole_waiting += 1
        try:
            while self._sole or (self._shared if sole else self._sole_waiting):
                await self._changed.wait()
        finally:
            if sole:
                self._sole_waiting -= 1
                self._notify()
        # No await since the check: the session is ours.
        if sole:
            self._sole = True
        else:
            self._shared += 1

    def release(self, *, sole: bool) -> None:
        if sole:
            self._sole = False
        else:
            self._shared -= 1
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


class CallClock:
    """A call's deadline that stops while a person is being asked: a tool's timeout
    bounds the server's work, not how long someone takes to answer it."""

    def __init__(self, timeout: float | None) -> None:
        start = anyio.current_time()
        self.scope = anyio.CancelScope(deadline=math.inf if timeout is None else start + timeout)
        self._left: float | None = None
        self.started = False  # the call got its session (else it waited for it throughout)

    def pause(self) -> None:
        if math.isfinite(self.scope.deadline):
            self._left = max(self.scope.deadline - anyio.current_time(), 0.0)
            self.scope.deadline = math.inf

    def resume(self) -> None:
        if self._left is not None:
            self.scope.deadline = anyio.current_time() + self._left
            self._left = None


@dataclass
class _Asked:
    params: types.ElicitRequestParams
    answered: anyio.Event = field(default_factory=anyio.Event)
    reply: ElicitReply | None = None

    def answer(self, reply: ElicitReply) -> None:
        if self.reply is None:
            self.reply = reply
            self.answered.set()


class ElicitRoute:
    """One call's way to a person: the session's callback hands a request over, and
    `serve`, running in the caller's own task group (its context: the activity's), asks
    the handler and hands the answer back."""

    def __init__(self, handler: ElicitationHandler, clock: CallClock) -> None:
        self._handler = handler
        self._clock = clock
        self._send: MemoryObjectSendStream[_Asked]
        self._receive: MemoryObjectReceiveStream[_Asked]
        self._send, self._receive = anyio.create_memory_object_stream[_Asked](math.inf)
        self._pending: list[_Asked] = []

    async def ask(self, params: types.ElicitRequestParams) -> ElicitReply:
        """The server's request, answered once the caller's handler has an answer."""
        asked = _Asked(params)
        try:
            self._send.send_nowait(asked)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return types.ElicitResult(action="cancel")
        self._pending.append(asked)
        await asked.answered.wait()
        return asked.reply or types.ElicitResult(action="cancel")

    async def serve(self) -> None:
        async for asked in self._receive:
            self._clock.pause()
            try:
                answer = await self._handler(*_question(asked.params))
                asked.answer(_reply(answer, asked.params))
            except Exception as err:  # the handler's failure is the server's error reply
                message = f"the client could not ask a person: {type(err).__name__}: {err}"
                asked.answer(types.ErrorData(code=types.INTERNAL_ERROR, message=message))
            finally:
                asked.answer(types.ElicitResult(action="cancel"))  # cancelled: nobody answers
                self._clock.resume()

    def close(self) -> None:
        """The call is over: what is still unanswered is cancelled."""
        self._send.close()
        self._receive.close()
        for asked in self._pending:
            asked.answer(types.ElicitResult(action="cancel"))


def declined(reason: str) -> types.ElicitResult:
    """A decline for an elicitation no call can take to a person, saying why."""
    return types.ElicitResult.model_validate({"action": "decline", "_meta": {"reason": reason}})


def _question(params: types.ElicitRequestParams) -> tuple[str, dict[str, Any]]:
    if isinstance(params, types.ElicitRequestURLParams):
        # URL mode: the person is asked to open the link; accepting sends no content.
        return f"{params.message}\n{params.url}", {}
    return params.message, dict(params.requestedSchema)


def _reply(answer: ElicitationAnswer, params: types.ElicitRequestParams) -> types.ElicitResult:
    if answer.action != "accept":
        return types.ElicitResult(action=answer.action)
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    return types.ElicitResult.model_validate({"action": "accept", "content": answer.content or {}})
