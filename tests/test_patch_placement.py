"""New runs ask no workflow patch mid-run: a patch asked after a local
activity could land in another workflow task on replay. A tool's `state.compact()` in a
thread that continues as new every 20 events failed its replays about half the time when
`context-compaction-v1` was asked where the compaction ran (the worker's own workflow task
failed with a nondeterminism error, and the thread stopped answering)."""

from __future__ import annotations

from support import assert_runs_replay, patch_markers, ran_workflow_code, run_histories
from test_context_compaction import ask, chat_script, chat_thread

from weft.workflows.agent_thread import TRUTHFUL_LOG_PATCH
from weft.workflows.definitions_refresh import DEFINITIONS_CHECK_PATCH, DEFINITIONS_VERSION_PATCH
from weft.workflows.history_gauge import GAUGE_PATCH
from weft.workflows.idle_watch import IDLE_PATCH
from weft.workflows.subagents.spawner import CHILD_ID_PATCH


async def test_compactions_a_tool_asks_for_replay_in_every_run(
    start_worker, temporal_client, scripted_server
):
    """Four turns, each compacting mid-turn through a tool, across continue-as-new: every
    turn is answered, every run replays, and each run's only patch markers are those its
    first task asks for (with the old placement, `context-compaction-v1` markers appear,
    replays fail and turns stall)."""
    tool_turn = {
        "match": "please compact",
        "replies": [
            {"tool_calls": [{"name": "compact_now", "arguments": {"why": "mid-turn"}}]},
            {"tool_calls": [{"name": "compact_now", "arguments": {"why": "again"}}]},
            {"text": "compacted"},
        ],
    }
    chat = await chat_thread(
        start_worker,
        temporal_client,
        scripted_server,
        chat_script(extra_turns=[tool_turn]),
        options={"continueAsNewEvents": 20},
    )
    turns = 0
    for n in range(4):
        state = await ask(chat.handle, f"please compact {n}", turns)
        assert state.last_outcome == "compacted"
        turns = state.counters.turns
    assert chat.worker.store.boundaries.list(chat.started.id)
    runs = await run_histories(
        temporal_client, chat.started.id, chat.started.first_execution_run_id or ""
    )
    assert len(runs) > 1, "the thread never continued as new"
    for run in runs:
        asked_at_start = {
            GAUGE_PATCH,
            TRUTHFUL_LOG_PATCH,
            CHILD_ID_PATCH,
            DEFINITIONS_VERSION_PATCH,
            DEFINITIONS_CHECK_PATCH,
            IDLE_PATCH,
        }
        assert {name for _, name in patch_markers(run)} <= asked_at_start
    # Only the newest run may still wait for its first task (the server's backoff between
    # runs); it ran no code, so there is nothing of it to replay yet.
    assert all(ran_workflow_code(run) for run in runs[:-1])
    assert await assert_runs_replay(runs) >= len(runs) - 1
    await chat.handle.signal("terminate", {})
