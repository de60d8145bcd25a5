"""The main transcript's tool calls still waiting for results, and work held until they have them.

Providers need each tool call's result right after the assistant message that made it: a
message placed between them (a tool's `inject_message` while the step's other calls still
run) would break the pair. Such work waits here and runs once the last call is answered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from weft.contract.messages import Message


@dataclass
class OpenCalls:
    """The unanswered calls of the last main-transcript assistant message.

    Not carried across continue-as-new: a run continues only at a safe point, when every
    call of the step has its result, so nothing waits then.
    """

    waiting: set[str] = field(default_factory=set)
    held: list[Callable[[], None]] = field(default_factory=list)

    def note(self, message: Message) -> None:
        """Follow a main-transcript message as it is indexed; run held work when the last
        waiting call gets its result."""
        if message.role == "assistant" and message.tool_calls:
            self.waiting = {call.id for call in message.tool_calls}
        elif message.role == "tool" and message.tool_call_id in self.waiting:
            self.waiting.discard(message.tool_call_id)
            if not self.waiting:
                held, self.held = self.held, []
                for work in held:
                    work()

    def after_answers(self, work: Callable[[], None]) -> None:
        """Run `work` now when no call waits, else once the waiting calls are answered."""
        if self.waiting:
            self.held.append(work)
        else:
            work()
