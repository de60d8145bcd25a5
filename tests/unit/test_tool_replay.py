"""The replay table of eval runs: matching by name and canonical arguments, each recorded
result served once in order, a retry given the same answer, a miss named."""

from __future__ import annotations

from weft.activities.tool_replay import NO_RECORDING, ReplayTable, ToolReplays
from weft.contract.activities import ToolResult


def _ok(value: object) -> ToolResult:
    return ToolResult(status="success", result=value)


def test_results_are_served_once_in_order_by_canonical_arguments():
    """Two recorded calls with equal arguments are served in order, whatever the key order
    of the new call's JSON; a third is a miss naming the call."""
    table = ReplayTable(
        [("t", {"a": 1, "b": 2}, _ok("first")), ("t", {"b": 2, "a": 1}, _ok("second"))]
    )
    assert table.take("t", '{"b": 2, "a": 1}', "m1").result == "first"
    assert table.take("t", '{"a":1,"b":2}', "m2").result == "second"
    missed = table.take("t", '{"a":1,"b":2}', "m3")
    assert missed.status == "error" and missed.error_code == NO_RECORDING
    assert table.misses == ['t({"a":1,"b":2})'] and table.served == 2


def test_a_retry_gets_the_same_answer():
    """A retried attempt of one call (same result message id) does not consume another
    recorded result."""
    table = ReplayTable([("t", {}, _ok(1)), ("t", {}, _ok(2))])
    assert table.take("t", "{}", "m1").result == 1
    assert table.take("t", "{}", "m1").result == 1
    assert table.take("t", "{}", "m2").result == 2


def test_threads_without_a_table_run_live():
    """Only registered threads are replayed; a forgotten one runs live again."""
    replays = ToolReplays()
    assert replays.serve("x", "t", "{}", "m") is None
    replays.register("x", ReplayTable([("t", {}, _ok(1))]))
    served = replays.serve("x", "t", "{}", "m")
    assert served is not None and served.result == 1
    replays.forget("x")
    assert replays.serve("x", "t", "{}", "m2") is None
