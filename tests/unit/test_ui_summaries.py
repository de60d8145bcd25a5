"""The Temporal UI's text: activity summaries, static summaries and current details."""

from __future__ import annotations

import json

from unit_support import memory

from weft.contract.actions import PendingAction
from weft.contract.budget import Budget, BudgetSpend, BudgetState
from weft.contract.messages import QueuedMessage
from weft.contract.subagents import RegistryEntry
from weft.contract.thread import QueueEntry
from weft.contract.thread_env import EnvEntry
from weft.contract.ui_text import (
    REDACTED,
    SUMMARY_MAX_CHARS,
    one_line,
    safe_line,
    secret_values,
    thread_summary,
)
from weft.workflows import ui_summaries

SECRET = "sk-live-0123456789abcdef"


def test_model_call_names_model_step_and_side():
    """A model call reads as its model, step and side, and the prompt tool it runs for."""
    assert ui_summaries.model_call("gpt-4o", 3, "a") == "model gpt-4o · step 3 · side a"
    assert ui_summaries.model_call("m", 1, "b", prompt="research").endswith("· prompt research")


def test_tool_call_shows_name_and_short_arguments():
    """A tool call shows its name and each argument, long strings cut, nesting not opened."""
    args = {"query": "how do I " + "x" * 200, "limit": 5, "filters": {"a": 1}, "ids": [1, 2]}
    text = ui_summaries.tool_call("search", json.dumps(args), [])
    assert text.startswith('search(query="how do I')
    assert "limit=5" in text
    assert "filters={…}" in text
    assert "ids=[2]" in text
    assert "x" * 30 not in text
    assert len(text) <= SUMMARY_MAX_CHARS


def test_tool_call_redacts_secret_values_and_secret_names():
    """A value equal to (or holding) an env secret, and a key named like a credential, are
    never shown."""
    args = {"note": f"use {SECRET} now", "api_key": "plain-looking", "password": 1234}
    text = ui_summaries.tool_call("login", json.dumps(args), [SECRET])
    assert SECRET not in text
    assert "plain-looking" not in text
    assert "1234" not in text
    assert text.count(REDACTED) == 3


def test_tool_call_with_arguments_that_are_not_json():
    """Unparseable arguments are shown cut and redacted, not dropped or raised on."""
    text = ui_summaries.tool_call("t", f"{{broken {SECRET}", [SECRET])
    assert text.startswith("t(") and SECRET not in text


def test_secret_is_redacted_before_the_line_is_cut():
    """Cutting first could leave a secret's first half behind: redaction comes first."""
    text = "a" * 90 + SECRET
    line = safe_line(text, [SECRET])
    assert SECRET[:5] not in line
    assert len(line) <= SUMMARY_MAX_CHARS


def test_secret_values_reads_raw_and_typed_env():
    """Raw values are secrets by default; `text` values are not; EnvEntry objects work too."""
    env = {
        "A": "raw-secret",
        "B": {"value": "shown", "type": "text"},
        "C": EnvEntry(value="typed-secret"),
        "D": "",
    }
    assert secret_values(env) == ["typed-secret", "raw-secret"]


def test_thread_summary_is_agent_and_first_user_line_without_secrets():
    """The static summary names the agent and the first user line, redacted, on one line."""
    messages = [
        QueuedMessage(role="system", content="ignored"),
        QueuedMessage(role="user", content=f"\n  Deploy with {SECRET}\nsecond line"),
    ]
    summary = thread_summary("deployer", messages, [SECRET])
    assert summary == f"deployer · Deploy with {REDACTED}"
    assert thread_summary("deployer", [], []) == "deployer"


def test_one_line_collapses_and_cuts():
    """Newlines and runs of spaces become one space; long text ends in an ellipsis."""
    assert one_line("a\n\n b   c") == "a b c"
    cut = one_line("word " * 50, limit=20)
    assert len(cut) == 20 and cut.endswith("…")


def test_files_copy_names_source_target_and_paths():
    """A copy shows its first path, how many more, and from which thread to which."""
    text = ui_summaries.files_copy("thread-a", "thread-b", ["notes.md", "b", "c"])
    assert text == "copy notes.md +2 · thread-a → thread-b"


def test_current_details_show_status_turn_queue_actions_children():
    """The details list what a reader of the UI wants now, in markdown."""
    mem = memory()
    mem.status, mem.active_turn, mem.active_side = "running", "turn_1", "a"
    mem.queue.append(QueueEntry(queue_id="q1", turn_id="turn_2", enqueued_at="now"))
    mem.actions.pending["act_1"] = PendingAction(
        action_id="act_1",
        kind="tool_permission",
        tool_call_id="call_1",
        tool_name="delete_file",
        turn_id="turn_1",
        prompt=f"delete with {SECRET}",
        decisions=["approve", "deny"],
        requested_at="now",
    )
    mem.subagents.children["c1"] = RegistryEntry(
        reference="c1",
        name="researcher",
        resumable=True,
        blocking=False,
        status="running",
        parent_communication="implicit",
        created_at="now",
        agent="researcher",
        tool="research",
    )
    details = ui_summaries.current_details(mem)
    assert details.startswith("**helper** · `running`")
    assert "- turn `turn_1` · side a" in details
    assert "- queue: 1" in details
    assert "- pending actions: tool_permission delete_file" in details
    assert "- children: researcher running" in details
    assert SECRET not in details  # an action's prompt is content: not shown
    assert "budget" not in details


def test_current_details_render_a_budget_when_there_is_one():
    """Spent against each limit set, and the limit that blocked the tree."""
    mem = memory()
    mem.budget = BudgetState(
        root_thread_id="t1",
        limits=Budget(max_tokens=10_000, max_cost_usd=1.0),
        spent=BudgetSpend(tokens=1234, cost_usd=0.25),
        blocked="costUsd",
    )
    details = ui_summaries.current_details(mem)
    assert "- budget: 1,234 / 10,000 tokens · $0.2500 / $1.00 · **blocked by costUsd**" in details


def test_current_details_leave_out_a_budget_without_limits():
    """A budget with no limit set says nothing the usage line does not."""
    mem = memory()
    mem.budget = BudgetState(root_thread_id="t1", limits=Budget())
    assert "budget" not in ui_summaries.current_details(mem)
