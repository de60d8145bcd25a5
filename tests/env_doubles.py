"""A double of the Env seam (activities/env.py) for tests of the code that dispatches
through it: every call gets one canned result, and the calls are kept for the test."""

from __future__ import annotations

from weft.activities.env import Dispatched, ToolDispatch, ToolDispatcher


class CannedTools:
    """An Env whose every tool call answers `dispatched`, recording each request."""

    def __init__(self, dispatched: Dispatched) -> None:
        self.dispatched = dispatched
        self.requests: list[ToolDispatch] = []

    def tools(self) -> ToolDispatcher:
        return self

    async def dispatch(self, request: ToolDispatch) -> Dispatched:
        self.requests.append(request)
        return self.dispatched
