"""TurnBook and outcome_of: how a turn ended, as a caller waiting for it is told, learnt
from the facts the thread's turn events state, without a worker."""

from __future__ import annotations

from unit_support import FixedContext, memory, snapshot

from weft.contract.messages import QueuedMessage
from weft.contract.thread import UsageTotals
from weft.contract.turns import TurnResult
from weft.workflows.continuation import carry_over, restore
from weft.workflows.queue import ThreadQueue
from weft.workflows.stop_rules import Stop
from weft.workflows.thread_state import ThreadMemory
from weft.workflows.turn_book import RECENT_TURNS, TurnBook
from weft.workflows.turn_end import finish_turn
from weft.workflows.turn_events import turn_failed, turn_started
from weft.workflows.turn_waiters import outcome_of


def _reply(mem: ThreadMemory, turn_id: str, text: str | None, *, depth: int = 0) -> str:
    message = mem.new_message(
        role="assistant", content=text, side="a", turn_id=turn_id, depth=depth
    )
    return message.id


def _use(mem: ThreadMemory, tokens_in: int, tokens_out: int, cost: float) -> None:
    mem.usage.input_tokens += tokens_in
    mem.usage.output_tokens += tokens_out
    mem.usage.cost_usd = (mem.usage.cost_usd or 0.0) + cost


def test_a_completed_turn_has_its_answer_usage_and_cursor() -> None:
    """The last reply of the main transcript is the answer; usage is the turn's own."""
    mem = memory()
    _use(mem, 100, 10, 0.5)  # an earlier turn's usage is not this turn's
    turn_started(mem, "turn_1", {"side": "a"})
    _reply(mem, "turn_1", "let me check")
    _use(mem, 7, 3, 0.25)
    answer = _reply(mem, "turn_1", "It is sunny.")
    _reply(mem, "turn_1", "a prompt tool's own reply", depth=1)
    finish_turn(mem, "a", "turn_1", Stop("turn", "stop_on_response", "It is sunny."))

    result = mem.turns.results["turn_1"]
    assert (result.status, result.stop_reason) == ("completed", "stop_on_response")
    assert (result.response, result.message_id) == ("It is sunny.", answer)
    assert result.usage == UsageTotals(
        input_tokens=7, output_tokens=3, cached_tokens=0, cost_usd=0.25
    )
    assert result.events_cursor == mem.outbox[-1].event_id
    assert mem.outbox[-1].type == "turn.completed"


def test_a_lifecycle_tool_response_is_the_answer() -> None:
    """A stop tool's response becomes the visible message, and the answer."""
    mem = memory()
    turn_started(mem, "turn_1", {"side": "a"})
    _reply(mem, "turn_1", None)
    finish_turn(mem, "a", "turn_1", Stop("turn", "stop_tool", "All done."))
    result = mem.turns.results["turn_1"]
    assert result.response == "All done." and result.stop_reason == "stop_tool"
    assert result.message_id == mem.outbox_messages[-1].id


def test_session_fail_and_hook_blocked() -> None:
    """session_fail is a failed turn with its message; hook_blocked is refused, with the
    refusal the step recorded and no answer."""
    mem = memory()
    turn_started(mem, "turn_1", {"side": "a"})
    finish_turn(mem, "a", "turn_1", Stop("session", "session_fail", "cannot book"))
    failed = mem.turns.results["turn_1"]
    assert (failed.status, failed.response, failed.error) == (
        "failed",
        "cannot book",
        "cannot book",
    )

    turn_started(mem, "turn_2", {"side": "a"})
    _reply(mem, "turn_2", "hidden")
    mem.last_outcome = "hook 'audit' refused: no"
    finish_turn(mem, "a", "turn_2", Stop("session", "hook_blocked"))
    refused = mem.turns.results["turn_2"]
    assert (refused.status, refused.stop_reason) == ("refused", "hook_blocked")
    assert refused.error == "hook 'audit' refused: no" and refused.response is None


def test_failed_and_aborted_turns() -> None:
    """turn.failed is failed with the step's outcome, or aborted once terminated."""
    mem = memory()
    turn_started(mem, "turn_1", {"side": "a"})
    mem.stop.step_failed()
    mem.last_outcome = "HTTP 401: no key"
    turn_failed(mem, "turn_1", mem.stop_reason)
    failed = mem.turns.results["turn_1"]
    assert (failed.status, failed.stop_reason, failed.error) == (
        "failed",
        "step_error",
        "HTTP 401: no key",
    )

    turn_started(mem, "turn_2", {"side": "a"})
    mem.terminated_at, mem.terminate_reason = mem.timestamp(), "enough"
    turn_failed(mem, "turn_2", None)
    aborted = mem.turns.results["turn_2"]
    assert (aborted.status, aborted.stop_reason) == ("aborted", "aborted_by_user")
    assert aborted.error == "the thread was terminated: enough"


def test_messages_that_join_a_turn_end_with_it() -> None:
    """A message read by a running turn's step gets that turn's result."""
    mem = memory()
    queue = ThreadQueue(mem)
    entry = queue.add_message(QueuedMessage(role="user", content="and also"))
    mem.active_turn = "turn_1"
    assert outcome_of(mem, entry) is None  # queued
    queue.pop()
    mem.turns.join(entry.turn_id, "turn_1")
    mem.active_turn = None
    assert outcome_of(mem, entry) is None  # read by turn_1, which runs
    turn_started(mem, "turn_1", {"side": "a"})
    _reply(mem, "turn_1", "both")
    finish_turn(mem, "a", "turn_1", Stop("turn", "stop_on_response", "both"))
    joined = outcome_of(mem, entry)
    assert joined is not None and joined.turn_id == "turn_1" and joined.response == "both"
    assert mem.turns.joined == {}


def test_queued_messages_that_never_run_are_aborted() -> None:
    """Removed from the queue, or still queued when terminated: aborted, saying which."""
    mem = memory()
    queue = ThreadQueue(mem)
    removed = queue.add_message(QueuedMessage(role="user", content="a"))
    kept = queue.add_message(QueuedMessage(role="user", content="b"))
    queue.remove(removed.queue_id)
    gone = outcome_of(mem, removed)
    assert gone is not None and gone.status == "aborted" and "removed" in (gone.error or "")
    assert outcome_of(mem, kept) is None
    mem.terminated_at = mem.timestamp()
    late = outcome_of(mem, kept)
    assert late is not None and late.status == "aborted"
    assert late.error == "the thread was terminated before a turn read the message"
    mem.active_turn = kept.turn_id  # its turn runs: it ends with that turn instead
    assert outcome_of(mem, kept) is None


def test_the_book_is_bounded() -> None:
    """Only the newest results and asking update ids are kept."""
    book = TurnBook()
    for i in range(RECENT_TURNS + 5):
        book.record(TurnResult(turn_id=f"turn_{i}", status="completed"))
        book.ask(f"u{i}", f"turn_{i}")
    assert len(book.results) == len(book.asked) == RECENT_TURNS
    assert "turn_0" not in book.results and f"turn_{RECENT_TURNS + 4}" in book.results
    assert book.answered("u0") is None
    assert book.answered(f"u{RECENT_TURNS}") == book.results[f"turn_{RECENT_TURNS}"]


def test_results_cross_continue_as_new_without_their_text() -> None:
    """A run carries results (less their text) and who asked; the turn in progress keeps
    its usage baseline. Histories from before carry nothing and restore an empty book."""
    mem = memory()
    turn_started(mem, "turn_1", {"side": "a"})
    _reply(mem, "turn_1", "the answer")
    finish_turn(mem, "a", "turn_1", Stop("turn", "stop_on_response", "the answer"))
    mem.turns.ask("ask-1", "turn_1")
    _use(mem, 5, 5, 0.1)
    turn_started(mem, "turn_2", {"side": "a"})

    carried = carry_over(mem, snapshot(), None)
    restored = restore("t1", mem.start, carried, FixedContext())
    again = restored.turns.answered("ask-1")
    assert again is not None and again.response is None
    assert again.message_id == mem.turns.results["turn_1"].message_id
    assert restored.turns.recent.usage_at_start == mem.usage
    assert mem.turns.results["turn_1"].response == "the answer"  # this run's is untouched

    old = carried.model_copy(update={"turns": None})
    assert restore("t1", mem.start, old, FixedContext()).turns == TurnBook()
