"""Why the thread's latest turn or session stopped: the one owner of the stop reason.

Each change is a method naming why the thread stops (or why the reason is cleared), so
"who sets the stop reason" is this file's callers. Carried across continue-as-new
(`ThreadCarryOver.stop_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass

from weft.contract.thread import StopReason

# Reasons a model step records itself; its generic failure must not overwrite them.
STEP_VERDICTS: frozenset[StopReason] = frozenset(
    {"aborted_by_user", "hook_blocked", "budget_exhausted", "interrupted"}
)


@dataclass
class ThreadStop:
    """The stop reason of the thread; None while nothing stopped it in this session."""

    reason: StopReason | None = None

    def session_started(self) -> None:
        """A new session has not stopped yet."""
        self.reason = None

    def budget_raised(self) -> None:
        """A raised budget resumes the turn the spent budget stopped."""
        self.reason = None

    def turn_ended(self, reason: StopReason) -> None:
        """The stop rules ended the turn (or the session) for `reason`."""
        self.reason = reason

    def session_turns_spent(self) -> None:
        self.reason = "max_session_turns"

    def interrupted(self) -> None:
        """`interrupt_turn` stopped the running turn."""
        self.reason = "interrupted"

    def aborted_by_user(self) -> None:
        """The thread was terminated, or its call cancelled, during the step."""
        self.reason = "aborted_by_user"

    def hook_blocked(self) -> None:
        self.reason = "hook_blocked"

    def budget_exhausted(self) -> None:
        self.reason = "budget_exhausted"

    def step_failed(self) -> None:
        """The step failed: its model calls, or a queued message too big to schedule."""
        self.reason = "step_error"

    def stopped_in_step(self) -> bool:
        """Whether the step recorded its own reason (`STEP_VERDICTS`)."""
        return self.reason in STEP_VERDICTS
