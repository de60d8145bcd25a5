"""The thread's side of budgets (docs/budgets.md): which ledger it spends from, what it
last heard of it, the refusal of a spent budget, and `set_budget` on a tree's root.

The ledger itself is in the store: `model.call` checks and charges it in the writes it
makes anyway, so the workflow adds no command to a step. `set_budget` writes its
`limit.changed` with the `store.flush` local activity (the store projects it into the
ledger), only when it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.budget import (
    BUDGET_EXHAUSTED,
    SIGNAL_SET_BUDGET,
    UPDATE_SET_BUDGET,
    Budget,
    BudgetLimitName,
    BudgetState,
    SetBudget,
)
from weft.contract.events import Event
from weft.contract.thread import StopReason, ThreadStartInput, TurnCursor
from weft.workflows.background import BackgroundTasks
from weft.workflows.control import parse_single, parse_update
from weft.workflows.control_plane import ControlPlane
from weft.workflows.outbox import Outbox
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.turn_events import TurnLog, turn_started
from weft.workflows.views import Facts

# Guards the local activity `set_budget` runs: before it, the signal was unknown.
SET_BUDGET_PATCH = "set-budget-v1"


class BudgetSeen(Protocol):
    """Where the tree's budget, as the store last reported it, is kept."""

    budget: BudgetState | None


class BudgetRoot(Protocol):
    """Which thread's ledger this thread spends from."""

    @property
    def thread_id(self) -> str: ...

    @property
    def start(self) -> ThreadStartInput: ...


class BudgetView(BudgetSeen, BudgetRoot, Facts, TurnLog, Protocol):
    """What `set_budget` reads and changes of the thread."""

    @property
    def outbox(self) -> list[Event]: ...

    @property
    def stop(self) -> ThreadStop: ...

    @property
    def stop_reason(self) -> StopReason | None: ...

    @property
    def truthful_log(self) -> bool: ...

    def is_idle(self) -> bool: ...


def budget_root(mem: BudgetRoot) -> str:
    """The thread whose ledger this thread's model calls are checked against and charged to."""
    return mem.start.budget_root or mem.thread_id


def observe(mem: BudgetSeen, state: BudgetState | None) -> None:
    """Keep what the store last said about the tree's budget (shown by `thread_read`)."""
    if state is not None:
        mem.budget = state


def refusal(mem: BudgetSeen, err: ActivityError) -> str | None:
    """The reason text when `model.call` was refused because the budget is spent, else None.

    The refusal carries the ledger as the store saw it, so `thread_read` shows it at once.
    """
    cause = err.cause
    if not isinstance(cause, ApplicationError) or cause.type != BUDGET_EXHAUSTED:
        return None
    if cause.details and isinstance(cause.details[0], dict):
        try:
            state = BudgetState.model_validate(cause.details[0])
        except ValidationError:
            return cause.message  # the text still says what happened
        observe(mem, state)
        if state.blocked is not None:
            return f"{cause.message}: {how_to_raise(state.root_thread_id, state.blocked)}"
    return cause.message


# A limit's flag of `weft thread budget` and its field of the `budget` object.
_RAISE_BY: dict[BudgetLimitName, tuple[str, str]] = {
    "tokens": ("--max-tokens", "maxTokens"),
    "costUsd": ("--max-cost-usd", "maxCostUsd"),
    "modelCalls": ("--max-model-calls", "maxModelCalls"),
    "wallSeconds": ("--max-wall-seconds", "maxWallSeconds"),
}


def how_to_raise(root: str, limit: BudgetLimitName) -> str:
    """The two ways a user raises `limit` of the tree rooted at `root` (docs/budgets.md)."""
    flag, field = _RAISE_BY[limit]
    return (
        f"`weft thread budget {root} {flag} N` or `POST /threads/{root}/budget` "
        f'with {{"budget": {{"{field}": N}}}}'
    )


class BudgetControl:
    """`set_budget` (a checked update and a signal): new limits for the tree of a root."""

    def __init__(self, mem: BudgetView, background: BackgroundTasks, outbox: Outbox) -> None:
        self._mem = mem
        self._outbox = outbox
        self._background = background
        # Set by a raise that asked to resume a turn the spent budget stopped; the idle
        # loop takes it (`take_resume`).
        self.resume_requested = False

    def take_resume(self) -> TurnCursor | None:
        """The turn to run when a raise asked to resume one the budget stopped, else None.

        It is a new turn, announced here (the cursor's steps say it has begun): the model
        sees the transcript as it was left and goes on, with no invented message.
        """
        mem = self._mem
        if not self.resume_requested:
            return None
        self.resume_requested = False
        if mem.stop_reason != "budget_exhausted" or not mem.is_idle():
            return None
        mem.stop.budget_raised()
        turn_id = mem.new_id("turn")
        turn_started(mem, turn_id, {"side": "a", "reason": "budget_raised"})
        return TurnCursor(side="a", turn_id=turn_id, side_steps=0)

    def register(self, control: ControlPlane, *, refuse_if_not_started: Callable[[], None]) -> None:
        """Take the signal from the control plane and set the checked update."""
        control.handle_signals({SIGNAL_SET_BUDGET: self.on_signal})

        def validate(payload: Any = None) -> None:
            refuse_if_not_started()
            self.validate(payload)

        workflow.set_update_handler(UPDATE_SET_BUDGET, self.set_checked, validator=validate)

    def validate(self, payload: Any) -> None:
        """The update validator: refuse before anything reaches history."""
        problem = self._refused()
        if problem is not None:
            raise ApplicationError(problem, type="BudgetNotSettable")
        parse_update(UPDATE_SET_BUDGET, payload, SetBudget)

    async def set_checked(self, payload: Any = None) -> BudgetState:
        """The update: the tree's budget with the new limits, once the ledger has them."""
        return await self._apply(SetBudget.model_validate(payload))

    def on_signal(self, name: str, values: list[Any]) -> None:
        request = parse_single(name, values, SetBudget)  # InvalidPayload: a warning
        problem = self._refused()
        if problem is not None:
            self._mem.warn("budget_not_settable", name, problem)
        elif self._mem.truthful_log or workflow.patched(SET_BUDGET_PATCH):
            self._background.run(self._write(request))
        else:  # a history from before set_budget: the signal was unknown then
            self._mem.warn("unknown_signal", name, f"no signal named {name!r}")

    def _refused(self) -> str | None:
        mem = self._mem
        if mem.is_terminated():
            return f"thread {mem.thread_id} was terminated; its budget cannot change"
        root = budget_root(mem)
        if root != mem.thread_id:
            return (
                f"thread {mem.thread_id} spends from the budget of thread {root}, the root "
                f"of its tree: set_budget on {root} instead"
            )
        return None

    async def _write(self, request: SetBudget) -> None:
        await self._apply(request)

    async def _apply(self, request: SetBudget) -> BudgetState:
        mem = self._mem
        if not mem.truthful_log:  # new runs ask no patch mid-run (see ContextKeeper.fit)
            workflow.patched(SET_BUDGET_PATCH)
        current = mem.budget or BudgetState(root_thread_id=mem.thread_id, limits=Budget())
        limits = current.limits.changed(request)
        event = mem.emit(
            "limit.changed",
            {
                "rootThreadId": mem.thread_id,
                "reason": "set_budget",
                "limits": limits.model_dump(mode="json", by_alias=True, exclude_none=True),
                "previous": current.limits.model_dump(
                    mode="json", by_alias=True, exclude_none=True
                ),
            },
        )
        # Written now, on its own, so the ledger changes even while a turn (or a child's
        # turn) runs; the rest of the outbox goes with the step as usual.
        mem.outbox.remove(event)
        await self._outbox.persist_first([event], [])
        mem.budget = current.model_copy(update={"limits": limits, "blocked": None})
        if request.resume and mem.stop_reason == "budget_exhausted":
            self.resume_requested = True
        return mem.budget
