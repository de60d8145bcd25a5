"""Read models built from ThreadMemory alone: thread_read, the session snapshot, pages."""

from __future__ import annotations

from unit_support import memory, snapshot

from weft.contract.actions import PermissionPolicy
from weft.contract.definitions import AgentDef
from weft.workflows import read_models
from weft.workflows.thread_state import ThreadMemory


def _messages(mem: ThreadMemory, count: int) -> None:
    for i in range(count):
        mem.new_message(role="user", content=f"m{i}", side=None, turn_id="turn_1")


def test_preparing_thread_shows_its_start_input() -> None:
    """Before thread.init, the read model names the requested agent and no policy."""
    read = read_models.thread_read(memory(loaded=False))
    assert (read.agent, read.status, read.permission_state) == ("helper", "preparing", {})


def test_thread_read_follows_a_handoff_and_says_what_it_cannot_know() -> None:
    """After a handoff the active agent is shown; an unpriced model puts cost in `unknown`."""
    mem = memory()
    assert mem.snapshot is not None
    other = AgentDef.model_validate({"name": "expert", "sideA": {"prompt": "p"}})
    mem.snapshot = mem.snapshot.model_copy(update={"agents": {"expert": other}})
    mem.active_agent, mem.cost_unknown = "expert", True
    read = read_models.thread_read(mem)
    assert read.agent == "expert"
    assert read.unknown == ["usage.costUsd"]
    assert read.permission_state == {"policy": "none", "sessionAllowedTools": []}


def test_permission_state_counts_rules_and_approvals() -> None:
    """A configured policy shows its mode, rules by origin and session approvals."""
    mem = memory()
    mem.snapshot = snapshot(
        permissions={"mode": "auto", "rules": [{"tool": "rm", "decision": "deny"}]}
    )
    mem.actions.session_allowed_tools.add("weather")
    state = read_models.thread_read(mem).permission_state
    assert state["mode"] == "auto"
    assert state["rules"] == {"agent": 1, "prompt": 0}
    assert state["sessionAllowedTools"] == ["weather"]
    assert read_models.permission_state(mem, None, PermissionPolicy(mode="plan"))["mode"] == "plan"


def test_message_pages_follow_the_cursor(mem: ThreadMemory) -> None:
    """Pages return metadata from the cursor on, with a next cursor until the end."""
    _messages(mem, 5)
    first = read_models.message_page(mem, {"limit": 2})
    assert [m.position for m in first.messages] == [0, 1] and first.next_cursor == 2
    last = read_models.message_page(mem, {"cursor": 4, "limit": 2})
    assert [m.position for m in last.messages] == [4] and last.next_cursor is None
    odd = read_models.message_page(mem, {"cursor": "x", "limit": True})
    assert len(odd.messages) == 5  # malformed paging falls back to the defaults


def test_snapshot_window_pages_backwards(mem: ThreadMemory) -> None:
    """The snapshot shows the newest window; `before` walks back to the first message."""
    _messages(mem, 5)
    read = read_models.thread_read(mem)
    newest = read_models.snapshot_window(mem, read, {"limit": 2})["threads"][0]["history"]
    assert [m["position"] for m in newest["messages"]] == [3, 4]
    assert (newest["olderCursor"], newest["totalMessages"]) == (3, 5)
    oldest = read_models.snapshot_window(mem, read, {"before": 1, "limit": 2})
    history = oldest["threads"][0]["history"]
    assert [m["position"] for m in history["messages"]] == [0]
    assert history["olderCursor"] is None
